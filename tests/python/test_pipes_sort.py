# SPDX-License-Identifier: Apache-2.0
"""tierflow pipes and the sort from Python: locators from strings and buffers, the three
flavours (transfer, submit/await, post/reap with asyncio on the eventfd), explain(), errors,
and tierflow.sort against the data it sorted."""
import asyncio
import os
from pathlib import Path

import numpy as np
import pytest

import tierflow as tf


@pytest.fixture(scope="module")
def runtime():
    return tf.PipeRuntime.create(cpu_workers=1)


@pytest.fixture()
def d(tmp_path_factory):
    # /var/tmp: a file system that takes O_DIRECT (tmpfs may not)
    return str(tmp_path_factory.mktemp("pipes", numbered=True))


def test_buffer_to_file_and_back(runtime, d):
    src = np.random.default_rng(3).integers(0, 255, 1 << 22, dtype=np.uint8)
    path = os.path.join(d, "f")
    out = runtime.connect(src, f"file:{path}")
    assert out.explain()["hops"][0]["mechanism"] == "io_uring-write"
    out.transfer(0, 0, src.nbytes)
    out.drain()
    assert os.path.getsize(path) == src.nbytes
    back = np.zeros_like(src)
    pipe = runtime.connect(f"file:{path}", back)
    h = pipe.submit(0, 0, src.nbytes)
    assert h.wait().bytes_completed == src.nbytes
    assert (back == src).all()
    assert pipe.stats["bytes"] == src.nbytes


def test_memory_locators_and_explain(runtime):
    a = runtime.locator("dram:0:1MiB")
    assert (a.kind, a.capacity, a.tier, a.node) == ("memory", 1 << 20, "dram", 0)
    plan = runtime.explain("dram:0:1MiB", "dram:0:1MiB")
    assert plan["hops"] and "rejected" in plan


def test_submit_is_awaitable_and_reap_works_in_asyncio(runtime, d):
    path = os.path.join(d, "g")
    with open(path, "wb") as f:
        f.write(bytes(range(256)) * 4096)
    dst = np.zeros(1 << 20, np.uint8)
    pipe = runtime.connect(f"file:{path}", dst)

    async def main():
        await pipe.submit(0, 0, 1 << 19)
        for i in range(8):
            pipe.post((1 << 19) + i * 65536, (1 << 19) + i * 65536, 65536, i)
        tags = []
        while len(tags) < 8:
            for tag, n, error in await pipe.reap_async():
                assert error is None and n == 65536
                tags.append(tag)
        return sorted(tags)

    assert asyncio.run(main()) == list(range(8))
    assert dst.tobytes() == bytes(range(256)) * 4096


def test_try_post_driven_by_add_writer(runtime):
    # The pollable flavour with backpressure: post only while fd is writable, reap while it is
    # readable, both from the event loop's own readiness callbacks.
    piece, pieces = 64 << 10, 64
    src = np.random.default_rng(4).integers(0, 255, piece * pieces, dtype=np.uint8)
    dst = np.zeros_like(src)
    pipe = runtime.connect(src, dst, queue_depth=1, chunk_bytes=piece)
    assert pipe.try_post(0, 0, piece, 0) is True
    pipe.drain()
    assert [t for t, _, _ in pipe.reap()] == [0]

    async def main():
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        state = {"posted": 0, "reaped": 0}

        def writable():
            while state["posted"] < pieces:
                i = state["posted"]
                if not pipe.try_post(i * piece, i * piece, piece, i):
                    return  # full: called again once there is room
                state["posted"] += 1
            loop.remove_writer(pipe.fd)

        def readable():
            for tag, n, error in pipe.reap():
                assert error is None and n == piece
                state["reaped"] += 1
            if state["reaped"] == pieces and not done.done():
                loop.remove_reader(pipe.fd)
                done.set_result(None)

        loop.add_writer(pipe.fd, writable)
        loop.add_reader(pipe.fd, readable)
        await asyncio.wait_for(done, 30)

    asyncio.run(main())
    assert (dst == src).all()
    with pytest.raises(ValueError):
        pipe.try_post(0, 0, 0, 1)


def test_pipe_errors(runtime, d):
    with pytest.raises(ValueError):
        runtime.locator("floppy:0")
    with pytest.raises(LookupError):
        runtime.locator("dram:77:1MiB")
    with pytest.raises(FileNotFoundError) as e:
        runtime.locator(f"file:{d}/missing")
    assert isinstance(e.value, tf.MissingFileError) and isinstance(e.value, tf.IoError)
    assert (e.value.errno, e.value.filename) == (2, f"{d}/missing")
    with pytest.raises(ValueError, match="mode="):
        runtime.locator(f"file:{d}/x", mode="append")
    src = np.zeros(4096, np.uint8)
    with pytest.raises(ValueError, match="dst: it is read-only"):
        runtime.connect(src, b"immutable")
    copy = np.zeros(9, np.uint8)
    runtime.connect(b"immutable", copy).transfer(0, 0, 9)  # read-only memory as a source
    assert copy.tobytes() == b"immutable"
    pipe = runtime.connect(src, np.zeros(4096, np.uint8))
    with pytest.raises(ValueError):
        pipe.transfer(0, 0, 8192)
    existing = os.path.join(d, "exists")
    open(existing, "wb").write(b"x" * 4096)
    with pytest.raises(tf.Error) as e:
        runtime.connect(src, f"file:{existing}")  # a destination file is never overwritten
    assert Path(existing).read_bytes() == b"x" * 4096
    # The fix is spelled as Python's arguments, not as the C++ names.
    assert "mode='replace'" in str(e.value) and "mode='modify'" in str(e.value)
    assert "::" not in str(e.value)
    with pytest.raises(ValueError, match="mode='modify'") as e:
        runtime.connect(src, runtime.locator(f"file:{existing}:4096:4096", mode="replace"))
    assert "::" not in str(e.value)


def test_sort_matches_the_cli_contract_and_sorts(d):
    inp, out = os.path.join(d, "in.u64"), os.path.join(d, "out.u64")
    r = tf.sort(inp, out, memory=32 << 20, generate=16 << 20, threads=1)
    assert r["verified"] and r["records"] == 1 << 20 and r["memory_bytes"] == 32 << 20
    keys = np.fromfile(out, dtype=np.uint64)[::2]
    assert (np.diff(keys.astype(np.float64)) >= 0).all()
    data = np.fromfile(inp, dtype=np.uint64)
    assert sorted(data[::2].tolist()) == keys.tolist()
    with pytest.raises(ValueError, match="exists.*overwrite=True"):
        tf.sort(inp, out, memory=32 << 20)
    with pytest.raises(ValueError, match="format"):
        tf.sort(inp, os.path.join(d, "o2"), format="csv")
    with pytest.raises(ValueError, match="memory"):
        tf.sort(inp, os.path.join(d, "o3"), memory=1 << 20)
    with pytest.raises(tf.Error):
        tf.sort(os.path.join(d, "nothing"), os.path.join(d, "o4"))
    left = sorted(f for f in os.listdir(d) if f not in ("in.u64", "out.u64"))
    assert left == [], "the failed sorts left files behind"


def test_sort_gensort_records(d):
    inp, out = os.path.join(d, "in.gs"), os.path.join(d, "out.gs")
    r = tf.sort(inp, out, memory=48 << 20, generate=1000 * 100, format="gensort")
    assert r["records"] == 1000 and r["verified"]
    data = Path(out).read_bytes()
    keys = [data[i:i + 10] for i in range(0, len(data), 100)]
    assert keys == sorted(keys)


def test_tiered_area_from_python(runtime, d):
    area = runtime.tiered(24 << 20, tiers=["dram"], directories=[d],
                          tier_limits={"dram": 8 << 20}, extent_bytes=4 << 20)
    assert area.kind == "tiered"
    src = np.random.default_rng(9).integers(0, 255, 16 << 20, dtype=np.uint8)
    down = runtime.connect(src, area)
    down.transfer(0, 0, src.nbytes)
    stats = down.stats
    assert [s["bytes"] for s in stats["stages"]] == [8 << 20, 8 << 20]
    assert stats["switches"][-1].startswith("from byte 8388608 on: file in " + d)
    back = np.zeros_like(src)
    runtime.connect(area, back).transfer(0, 0, src.nbytes)
    assert (back == src).all()
    assert os.listdir(d) == []  # the area's file has no name
    runtime.release(area, 0, 8 << 20)
    state = runtime.tiered_state(area)
    assert state["stages"][0]["bytes"] == 0
    with pytest.raises(ValueError, match="were never written"):
        runtime.connect(area, back).transfer(0, 0, 4 << 20)
    with pytest.raises(ValueError, match="occupancy limit of 2"):
        runtime.tiered(1 << 20, occupancy_limit=2)
    with pytest.raises(ValueError, match="unknown tier|tier"):
        runtime.tiered(1 << 20, tiers=["tape"])
    with pytest.raises(MemoryError, match="no stage of the tiered area"):
        full = runtime.tiered(8 << 20, tiers=["dram"], tier_limits={"dram": 4 << 20},
                              extent_bytes=4 << 20)
        runtime.connect(src, full).transfer(0, 0, 8 << 20)
