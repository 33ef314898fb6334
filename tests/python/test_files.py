# SPDX-License-Identifier: Apache-2.0
"""The io_uring engine from Python: files opened as FileWindows are operands of copies (reads,
writes, file-to-file), write_back is fdatasync; everything a file operand cannot do is refused
with the fix, never a fault on the addresses that stand for the file."""
import asyncio
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import tierflow as tf


@pytest.fixture
def engine():
    try:
        return tf.IoUringEngine.create()
    except tf.UnsupportedError as e:  # seccomp or an old kernel: said so, not hidden
        pytest.skip(f"io_uring is not available here: {e}")


def random_file(path, n, seed=1):
    data = np.random.default_rng(seed).integers(0, 255, n, dtype=np.uint8)
    data.tofile(path)
    return data


def test_read_whole_file_and_a_range(engine, tmp_path):
    data = random_file(tmp_path / "in", (1 << 20) + 123)
    with engine.open_file(str(tmp_path / "in")) as w:
        assert w.length == data.size and not w.writable and not w.closed
        dst = np.zeros_like(data)
        engine.submit(tf.Operation.copy(dst, w)).wait()
        assert (dst == data).all()
        part = np.zeros(5000, np.uint8)
        r = w.at(4097, 5000)
        assert (r.offset, r.size) == (4097, 5000)
        engine.submit(tf.Operation.copy(part, r)).wait()
        assert (part == data[4097:9097]).all()
        assert w.at(data.size - 10).size == 10
    assert w.closed
    assert engine.ring_stats["reads"] >= 2


def test_write_sync_and_copy_file_to_file(engine, tmp_path):
    src = np.random.default_rng(3).integers(0, 255, 3 << 20, dtype=np.uint8)
    out, copy = tmp_path / "out", tmp_path / "copy"
    out.touch()
    copy.touch()
    with engine.open_file(str(out), writable=True, length=src.size) as w:
        engine.submit(tf.Operation.copy(w, src)).wait()
        engine.submit(tf.Operation.write_back(w)).wait()
        with engine.open_file(str(copy), writable=True, length=src.size) as c:
            engine.submit(tf.Operation.copy(c.at(0, 1 << 20), w.at(1 << 20, 1 << 20))).wait()
    assert (np.fromfile(out, np.uint8) == src).all()
    assert (np.fromfile(copy, np.uint8) == src[1 << 20:2 << 20]).all()
    s = engine.ring_stats
    assert s["syncs"] == 1 and s["writes"] >= 1 and s["file_copies"] >= 1


def test_await_and_batch_of_reads(engine, tmp_path):
    data = random_file(tmp_path / "in", 64 << 10)
    w = engine.open_file(str(tmp_path / "in"))
    parts = [np.zeros(4096, np.uint8) for _ in range(16)]
    ops = [tf.Operation.copy(p, w.at(i * 4096, 4096)) for i, p in enumerate(parts)]

    async def run():
        await engine.submit_batch(ops)

    asyncio.run(run())
    assert (np.concatenate(parts) == data).all()


def test_window_and_array_kept_while_the_read_runs(engine, tmp_path):
    data = random_file(tmp_path / "in", 8 << 20)
    w = engine.open_file(str(tmp_path / "in"))
    dst = np.zeros_like(data)
    h = engine.submit(tf.Operation.copy(dst, w))
    del w
    gc.collect()
    h.wait()
    assert (dst == data).all()


def test_file_operands_refused_where_they_cannot_go(engine, tmp_path):
    random_file(tmp_path / "in", 1 << 16)
    w = engine.open_file(str(tmp_path / "in"))
    buf = np.zeros(1 << 16, np.uint8)
    cpu = tf.CpuEngine.create(workers=1)
    with pytest.raises(tf.InvalidArgumentError, match="IoUringEngine that opened the file"):
        cpu.submit(tf.Operation.copy(buf, w))
    with pytest.raises(tf.InvalidArgumentError, match="IoUringEngine that opened the file"):
        cpu.submit_batch([tf.Operation.copy(buf, w)])
    with pytest.raises(tf.InvalidArgumentError, match="IoUringEngine that opened the file"):
        tf.IoUringEngine.create().submit(tf.Operation.copy(buf, w))
    with pytest.raises(tf.InvalidArgumentError, match="IoUringEngine that opened the file"):
        tf.submit_with_policy(tf.Operation.copy(buf, w), [cpu])
    with pytest.raises(tf.InvalidArgumentError, match="read-only: open it with writable=True"):
        tf.Operation.copy(w, buf)
    with pytest.raises(tf.InvalidArgumentError, match="writable=True"):
        tf.Operation.write_back(w)
    with pytest.raises(ValueError, match="buffer protocol"):
        tf.Operation.fill(w, 7)
    with pytest.raises(ValueError, match="buffer protocol"):
        tf.Operation.crc32c(w)
    with pytest.raises(tf.InvalidArgumentError, match="CPU or DSA"):
        engine.submit(tf.Operation.copy(buf, np.ones_like(buf)))
    for offset, size in ((1 << 16, None), (0, (1 << 16) + 1), (1 << 17, 1), (5, 0), (2**64 - 1, 2)):
        with pytest.raises(ValueError, match="give a non-empty range inside it"):
            w.at(offset, size)
    op = tf.Operation.copy(buf, w)
    w.close()
    with pytest.raises(tf.InvalidArgumentError, match="was closed: open the file again"):
        engine.submit(op)
    with pytest.raises(tf.InvalidArgumentError, match="was closed"):
        w.at(0)


def test_bad_files_and_options(engine, tmp_path):
    with pytest.raises(FileNotFoundError):
        engine.open_file(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="not a regular file"):
        engine.open_file(str(tmp_path))
    (tmp_path / "empty").touch()
    with pytest.raises(ValueError, match="give length="):
        engine.open_file(str(tmp_path / "empty"), writable=True)
    random_file(tmp_path / "short", 100)
    with pytest.raises(ValueError):
        engine.open_file(str(tmp_path / "short"), length=200)
    for kw in ({"queue_depth": 0}, {"max_read_bytes": 1000}, {"max_read_bytes": 0}):
        with pytest.raises(ValueError):
            tf.IoUringEngine.create(**kw)
    with pytest.raises(TypeError):
        tf.IoUringEngine.create(queue_depth=-1)


def test_reading_past_the_end_is_an_oserror_not_a_fault(engine, tmp_path):
    random_file(tmp_path / "in", 1 << 16)
    w = engine.open_file(str(tmp_path / "in"))
    os.truncate(tmp_path / "in", 100)  # shrunk under the window
    dst = np.zeros(1 << 16, np.uint8)
    with pytest.raises(tf.Error, match="in"):
        engine.submit(tf.Operation.copy(dst, w)).wait()


def test_a_window_may_hold_the_last_reference_to_its_engine(engine, tmp_path):
    # The engine goes after its windows, whatever order the interpreter clears them in.
    random_file(tmp_path / "in", 4096)
    code = ("import sys, tierflow as tf\n"
            "w = tf.IoUringEngine.create().open_file(sys.argv[1])\n"
            "ws = [tf.IoUringEngine.create().open_file(sys.argv[1]) for _ in range(4)]\n"
            "del w\n")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "in")], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
