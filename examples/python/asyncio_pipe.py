# SPDX-License-Identifier: Apache-2.0
"""Data pipes in an asyncio program: a file read into memory by awaited transfers, then by
posted ones whose completions the event loop learns from the pipe's eventfd."""
import asyncio
import os
import tempfile

import numpy as np

import tierflow as tf

CHUNK = 1 << 20


async def main(path: str, size: int) -> bytes:
    runtime = tf.PipeRuntime.create()
    dst = np.zeros(size, np.uint8)
    pipe = runtime.connect(f"file:{path}", dst)
    print("plan:", [(h["mechanism"], h["from"], h["to"]) for h in pipe.explain()["hops"]])
    await asyncio.gather(*(pipe.submit(o, o, CHUNK) for o in range(0, size // 2, CHUNK)))
    for tag, offset in enumerate(range(size // 2, size, CHUNK)):
        pipe.post(offset, offset, CHUNK, tag)
    left = pipe.posted
    while left:
        for tag, nbytes, error in await pipe.reap_async():
            assert error is None, error
            left -= 1
    return dst.tobytes()


with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as d:
    path = os.path.join(d, "data")
    data = os.urandom(16 * CHUNK)
    with open(path, "wb") as f:
        f.write(data)
    assert asyncio.run(main(path, len(data))) == data
    print(f"read {len(data)} bytes through the pipe")
