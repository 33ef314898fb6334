# SPDX-License-Identifier: Apache-2.0
"""tierflow: explicit, asynchronous data movement between memory tiers (docs/python.md).

A thin face of the C++ library: buffers on NUMA nodes and tiers, engines that run operations
asynchronously, handles that can be waited on (the GIL released), given a callback, or awaited
in asyncio.
"""
from ._tierflow import (  # noqa: F401
    Buffer, CacheEntry, Completion, DsaEngine, Locator, OffloadCache, Pipe, PipeRuntime, CpuEngine, Engine, Handle, NumaNode, Operation, Topology,
    IoUringEngine, FileWindow, FileRange,
    Error, InvalidArgumentError, NotFoundError, OutOfMemoryError, UnsupportedError,
    CancelledError, FailedError, IoError, MissingFileError, InternalError,
    __version__, coherence_support, complete, fence, invalidate, sort, system_memory_nodes,
    submit_with_policy, write_back, write_back_invalidate,
)
