# SPDX-License-Identifier: Apache-2.0
"""tierflow's Python package: buffers, operations on any buffer-protocol object, engines,
handles (wait, callbacks, await), errors (tests/python, run by `make test` from a fresh venv)."""
import asyncio
import gc
import mmap
import os
import sys
import threading
import time
import zlib

import numpy as np
import pytest

import tierflow as tf


@pytest.fixture(scope="module")
def engine():
    return tf.CpuEngine.create(workers=2)


def crc32c_reference(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_buffer_protocols():
    b = tf.Buffer.on_node(0, 10000)
    assert (len(b), b.size, b.node) == (10000, 10000, 0)
    assert b.mapped_size % 4096 == 0 and b.mapped_size >= 10000
    view = memoryview(b)
    view[:3] = b"abc"
    a = np.asarray(b)  # __array_interface__
    assert a.dtype == np.uint8 and a.shape == (10000,) and bytes(a[:3]) == b"abc"
    d = np.from_dlpack(b)
    assert bytes(d[:3]) == b"abc"
    assert b.__dlpack_device__() == (1, 0)
    f = np.frombuffer(b, dtype=np.uint32, count=2)
    assert f.base is not None


def test_buffer_outlives_its_views():
    b = tf.Buffer.on_node(0, 4096)
    a = np.asarray(b)
    del b
    gc.collect()
    a[:] = 7  # the array keeps the memory
    assert a.sum() == 7 * 4096


def test_copy_between_any_buffer_objects(engine):
    src = np.arange(1 << 20, dtype=np.uint8)
    for dst in (np.zeros(1 << 20, np.uint8), bytearray(1 << 20), tf.Buffer.on_node(0, 1 << 20)):
        engine.submit(tf.Operation.copy(dst, src)).wait()
        assert bytes(memoryview(dst)) == src.tobytes()
    m = mmap.mmap(-1, 1 << 20)
    engine.submit(tf.Operation.copy(m, src)).wait()
    assert m[:] == src.tobytes()
    view = memoryview(bytearray(100))
    engine.submit(tf.Operation.copy(view[10:20], b"0123456789")).wait()
    assert bytes(view[10:20]) == b"0123456789"


def test_every_operation(engine):
    a = np.frombuffer(np.random.default_rng(1).bytes(1 << 16), np.uint8).copy()
    b = a.copy()
    b[1234] ^= 1
    c = engine.submit(tf.Operation.compare(a, b)).wait()
    assert (c.equal, c.first_difference) == (False, 1234)
    assert engine.submit(tf.Operation.compare(a, a.copy())).wait().equal
    d = np.zeros(100, np.uint8)
    engine.submit(tf.Operation.fill(d, 0x0807060504030201)).wait()
    assert list(d[:9]) == [1, 2, 3, 4, 5, 6, 7, 8, 1]
    assert engine.submit(tf.Operation.compare_pattern(d, 0x0807060504030201)).wait().equal
    assert engine.submit(tf.Operation.crc32c(a[:1000])).wait().crc == crc32c_reference(
        a[:1000].tobytes())
    x, y = np.zeros_like(a), np.zeros_like(a)
    engine.submit(tf.Operation.dualcast(x, y, a)).wait()
    assert (x == a).all() and (y == a).all()
    m = np.arange(100, dtype=np.uint8)
    engine.submit(tf.Operation.move(m[10:], m[:90])).wait()
    assert list(m[10:15]) == [0, 1, 2, 3, 4]
    for op in (tf.Operation.write_back(a), tf.Operation.invalidate(a),
               tf.Operation.write_back_invalidate(a)):
        engine.submit(op).wait()
    assert zlib.crc32(a.tobytes()) == zlib.crc32(b.tobytes()[:1234] + a.tobytes()[1234:])
    with pytest.raises(tf.UnsupportedError, match="drain") as e:  # no queue of its own
        engine.submit(tf.Operation.drain()).wait()
    assert isinstance(e.value, NotImplementedError)


def test_batch_and_sizes(engine):
    src = np.arange(4096, dtype=np.uint8)
    dsts = [np.zeros(4096, np.uint8) for _ in range(8)]
    done = engine.submit_batch([tf.Operation.copy(d, src) for d in dsts]).wait()
    assert done.bytes_completed == 8 * 4096
    assert all((d == src).all() for d in dsts)
    small = np.zeros(10, np.uint8)
    engine.submit(tf.Operation.copy(small, src, size=5)).wait()
    assert list(small) == [0, 1, 2, 3, 4, 0, 0, 0, 0, 0]
    op = tf.Operation.copy(np.zeros(16, np.uint8), src, size=16)
    assert (op.kind, op.size) == ("copy", 16)
    # Without size=, buffers of different sizes are refused: never cut to the shorter one.
    with pytest.raises(tf.InvalidArgumentError, match="dst holds 16 bytes and src 4096"):
        tf.Operation.copy(np.zeros(16, np.uint8), src)
    with pytest.raises(tf.InvalidArgumentError, match="a holds 4096 bytes and b 4095"):
        tf.Operation.compare(src, src[:-1])
    with pytest.raises(tf.InvalidArgumentError, match="dst2 4095"):
        tf.Operation.dualcast(np.zeros(4096, np.uint8), np.zeros(4095, np.uint8), src)


@pytest.mark.parametrize("make,message", [
    (lambda: tf.Operation.copy(b"read-only", b"123456789"), "dst: it is read-only"),
    (lambda: tf.Operation.copy(np.zeros(8, np.uint8)[::2], b"1234"), "not C-contiguous"),
    (lambda: tf.Operation.copy(bytearray(8), np.zeros((4, 4), np.uint8)[:, 1]),
     "src: it is not C-contiguous"),
    (lambda: tf.Operation.copy(bytearray(8), 42), "src: it has no buffer (a int)"),
    (lambda: tf.Operation.copy(bytearray(4), b"12345678", size=8), "dst holds 4 bytes"),
    (lambda: tf.Operation.fill(bytearray(8), -1), None),
    (lambda: tf.Buffer.on_node(0, 0), "size"),
    (lambda: tf.Buffer.on_node(999, 4096), "999"),
    (lambda: tf.Buffer.on_node(0, 4096, huge_pages="big"), "huge_pages='big'"),
])
def test_bad_arguments_raise_value_error(make, message):
    with pytest.raises((ValueError, TypeError, LookupError)) as e:
        make()
    if message:
        assert message in str(e.value)


def test_read_only_numpy_destination_is_refused():
    a = np.zeros(16, np.uint8)
    a.flags.writeable = False
    with pytest.raises(tf.InvalidArgumentError, match="read-only"):
        tf.Operation.copy(a, b"x" * 16)


def test_engine_refusals_are_tierflow_errors(engine):
    a = bytearray(100)
    with pytest.raises(tf.InvalidArgumentError) as e:
        engine.submit(tf.Operation.copy(memoryview(a)[10:], memoryview(a)[:90])).wait()
    assert isinstance(e.value, ValueError) and isinstance(e.value, tf.Error)
    with pytest.raises(ValueError, match="at least one"):
        engine.submit_batch([])
    with pytest.raises(ValueError, match="mode="):
        engine.submit(tf.Operation.copy(bytearray(4), b"1234")).wait(mode="never")


def test_array_dropped_while_in_flight_is_kept_alive(engine):
    src = np.ones(64 << 20, np.uint8)
    dst = np.zeros(64 << 20, np.uint8)
    h = engine.submit(tf.Operation.copy(dst, src))
    del src, dst
    gc.collect()
    assert h.wait().bytes_completed == 64 << 20


def test_handle_dropped_while_in_flight_waits(engine):
    dst = np.zeros(64 << 20, np.uint8)
    engine.submit(tf.Operation.fill(dst, 0x0101010101010101))
    assert dst[-1] == 1  # the dropped handle waited for the fill


def test_wait_releases_the_gil(engine):
    src = np.ones(1 << 30, np.uint8)
    dst = np.zeros(1 << 30, np.uint8)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.01)
    before = len(ticks)
    engine.submit(tf.Operation.copy(dst, src)).wait(mode="block")
    during = len(ticks) - before
    stop.set()
    t.join()
    assert during > 5, "the other thread did not run while the copy was waited on"


def test_callback_runs_once_with_the_completion(engine):
    got = []
    ev = threading.Event()

    def cb(c):
        got.append((c.ok, c.bytes_completed, threading.get_ident()))
        ev.set()

    h = engine.submit(tf.Operation.copy(np.zeros(8 << 20, np.uint8), np.ones(8 << 20, np.uint8)),
                      callback=cb)
    h.wait()
    assert ev.wait(5)
    assert len(got) == 1 and got[0][:2] == (True, 8 << 20)


def test_a_raising_callback_is_reported_not_lost(engine, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(str(u.exc_value)))

    def cb(c):
        raise RuntimeError("from the callback")

    for size in (8, 8 << 20):  # inline on this thread, then on a worker
        engine.submit(tf.Operation.copy(bytearray(size), bytes(size)), callback=cb).wait()
    deadline = time.time() + 5
    while len(seen) < 2 and time.time() < deadline:
        time.sleep(0.01)
    assert seen == ["from the callback"] * 2


def test_asyncio_thousand_concurrent_awaits(engine):
    async def main():
        srcs = [np.full(4096, i % 256, np.uint8) for i in range(1000)]
        dsts = [np.zeros(4096, np.uint8) for _ in range(1000)]
        handles = [engine.submit(tf.Operation.copy(d, s)) for d, s in zip(dsts, srcs)]
        results = await asyncio.gather(*handles)
        assert all(r.bytes_completed == 4096 for r in results)
        assert all(d[0] == i % 256 for i, d in enumerate(dsts))
        big = engine.submit(tf.Operation.copy(np.zeros(256 << 20, np.uint8),
                                              np.ones(256 << 20, np.uint8)))
        assert (await big).bytes_completed == 256 << 20

    asyncio.run(main())


def test_several_coroutines_await_one_handle(engine):
    async def main():
        h = engine.submit(tf.Operation.copy(np.zeros(256 << 20, np.uint8),
                                            np.ones(256 << 20, np.uint8)))

        async def waiter():
            return (await h).bytes_completed

        return await asyncio.wait_for(asyncio.gather(*(waiter() for _ in range(3))), 60)

    assert asyncio.run(main()) == [256 << 20] * 3


def test_await_raises_the_operations_error(engine):
    async def main():
        a = bytearray(100)
        with pytest.raises(tf.InvalidArgumentError):
            await engine.submit(tf.Operation.copy(memoryview(a)[10:], memoryview(a)[:90]))

    asyncio.run(main())


def test_topology_and_tiers():
    t = tf.Topology.discover()
    assert t.is_this_system and t.nodes
    n = t.node(t.nodes[0].os_index)
    assert n.kind in ("dram", "hbm", "cxl", "nvm", "storage", "unknown") and n.kind_reason
    with pytest.raises(tf.NotFoundError):
        t.node(999)
    b = tf.Buffer.on_tier(t, "dram", 0, 8192)
    assert b.size == 8192
    with pytest.raises(ValueError):
        tf.Buffer.on_tier(t, "floppy", 0, 8192)
    over = tf.Topology.discover(overrides=f"{n.os_index}=hbm", use_environment=False)
    assert over.node(n.os_index).kind == "hbm"
    with pytest.raises(ValueError):
        tf.Topology.discover(overrides="x=y")
    assert 0 in tf.system_memory_nodes()


def test_the_contracts_spellings_with_a_topology(tmp_path):
    """The issue's names: engines, buffers and the cache created on a Topology given first."""
    t = tf.Topology.discover()
    e = tf.CpuEngine.create(t, workers=2)
    assert e.workers == 2
    src = tf.Buffer.on_node(t, 0, 1 << 16)
    np.asarray(src)[:] = 7
    dst = tf.Buffer.on_node(t, 0, 1 << 16, prefault=False)
    e.submit(tf.Operation.copy(dst, src)).wait()
    assert (np.asarray(dst) == 7).all()
    assert tf.DsaEngine.create(t, model=True).capabilities["is_model"]
    f = tmp_path / "f"
    f.write_bytes(b"x" * 4096)
    with tf.IoUringEngine.create(t).open_file(str(f)) as w:
        assert w.length == 4096
    cache = tf.OffloadCache.create(t, [e], {0: 1 << 20}, place_on=0)
    del t  # the cache keeps the topology it plans on
    gc.collect()
    with cache.access(src) as entry:
        entry.wait()
        assert (entry.data == 7).all()


def test_a_topology_from_a_file_is_refused_where_memory_or_cores_are_used():
    xml = os.path.join(os.path.dirname(__file__), "..", "fixtures", "xeon-max-9468-snc4-flat.xml")
    other = tf.Topology.discover(xml_path=xml)
    assert not other.is_this_system
    for make in (lambda: tf.Buffer.on_node(other, 0, 4096),
                 lambda: tf.DsaEngine.create(other, model=True),
                 lambda: tf.IoUringEngine.create(other),
                 lambda: tf.OffloadCache.create(other, [tf.CpuEngine.create(workers=1)],
                                                {0: 1 << 20})):
        with pytest.raises(tf.InvalidArgumentError, match="Topology.discover\\(\\) without xml_path"):
            make()
    with pytest.raises(tf.InvalidArgumentError, match="running system's topology"):
        tf.CpuEngine.create(other, workers=1)
    here = tf.Topology.discover()
    with pytest.raises(tf.NotFoundError):
        tf.Buffer.on_node(here, 999, 4096)
    with pytest.raises(tf.NotFoundError):
        tf.DsaEngine.create(here, model=True, node=999)


def test_capabilities_and_stats(engine):
    c = engine.capabilities
    assert c["kind"] == "cpu" and "copy" in c["ops"] and not c["is_model"]
    assert engine.stats["ops_submitted"] > 0
    assert engine.workers == 2


def test_wrong_objects_are_refused_by_name(engine):
    with pytest.raises(tf.InvalidArgumentError, match="submit_batch: give tierflow.Operation"):
        engine.submit_batch([None])
    with pytest.raises(tf.InvalidArgumentError, match="engines: give tierflow engines"):
        tf.OffloadCache.create([1], {0: 1 << 20})
    with pytest.raises(tf.InvalidArgumentError, match="not a str"):
        tf.submit_with_policy(tf.Operation.copy(bytearray(8), b"12345678"), ["cpu"])
    for bad in (lambda: engine.submit(None), lambda: tf.Operation.fill(bytearray(8), 2 ** 64),
                lambda: tf.Operation.copy(bytearray(8), b"x", size=-1)):
        with pytest.raises(TypeError):
            bad()
