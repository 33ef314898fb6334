# SPDX-License-Identifier: Apache-2.0
"""The DSA engine from Python (on its device model here, said so by its capabilities; the
hardware path refuses with every work queue's reason), the coherence primitives on buffers,
and fork(): an engine keeps working in the child as the C++ library promises."""
import os

import numpy as np
import pytest

import tierflow as tf


def test_dsa_model_copies_and_says_it_is_a_model():
    e = tf.DsaEngine.create(model=True)
    c = e.capabilities
    assert c["is_model"] and c["kind"] == "offload" and "copy" in c["ops"]
    src = np.random.default_rng(2).integers(0, 255, 1 << 20, dtype=np.uint8)
    dst = np.zeros_like(src)
    e.submit(tf.Operation.copy(dst, src)).wait()
    assert (dst == src).all()
    assert e.submit(tf.Operation.crc32c(src)).wait().crc != 0
    assert "model" in e.description


def test_dsa_hardware_refusal_names_the_reason():
    if any(q["usable"] for q in tf.DsaEngine.queues()):
        pytest.skip("this machine has a usable DSA work queue")
    with pytest.raises(tf.Error) as e:
        tf.DsaEngine.create()
    assert str(e.value)


def test_dsa_queues_from_fixtures_name_reasons():
    root = os.path.join(os.path.dirname(__file__), "..", "fixtures", "dsa")

    def queues(name):
        return tf.DsaEngine.queues(sysfs_root=os.path.join(root, name, "sys"),
                                   dev_root=os.path.join(root, name, "dev"))

    xeon = queues("xeon-max-8swq")
    assert len(xeon) == 8 and all(q["usable"] for q in xeon)
    unusable = queues("unusable")
    assert unusable and not any(q["usable"] for q in unusable)
    assert all(q["reason"] for q in unusable)
    assert any("disabled" in q["reason"] for q in unusable)
    assert tf.DsaEngine.queues(sysfs_root="/nonexistent-sysfs") == []  # no DSA there


def test_coherence_primitives_on_buffers():
    s = tf.coherence_support()
    assert s["line_size"] in (32, 64, 128, 256) and s["architecture"] in ("x86-64", "arm64")
    a = np.arange(1 << 16, dtype=np.uint8)
    b = bytearray(4096)
    for fn in (tf.write_back, tf.invalidate, tf.write_back_invalidate):
        fn(a)
        fn(b, fence="fence")
        fn(memoryview(b)[100:200], fence="none")
    tf.fence()
    tf.complete()
    assert a[255] == 255  # invalidating never loses data
    with pytest.raises(ValueError, match="fence='x'"):
        tf.write_back(a, fence="x")
    with pytest.raises(ValueError):
        tf.write_back(a, instruction="nope")
    with pytest.raises(ValueError, match="range"):
        tf.invalidate(42)


def test_an_engine_works_in_a_forked_child():
    engine = tf.CpuEngine.create(workers=2)
    src, dst = np.ones(8 << 20, np.uint8), np.zeros(8 << 20, np.uint8)
    engine.submit(tf.Operation.copy(dst, src)).wait()  # no operation in flight at the fork
    pid = os.fork()
    if pid == 0:
        try:
            d2 = np.zeros(8 << 20, np.uint8)
            engine.submit(tf.Operation.copy(d2, src)).wait()
            os._exit(0 if (d2 == 1).all() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    engine.submit(tf.Operation.fill(dst, 0)).wait()  # and in the parent
    assert not dst.any()


def test_copy_policies_divide_over_engines():
    cpu = tf.CpuEngine.create(workers=1)
    dsa = tf.DsaEngine.create(model=True)
    src = np.random.default_rng(4).integers(0, 255, 8 << 20, dtype=np.uint8)
    for policy in ("single", "brute-force", "auto"):
        dst = np.zeros_like(src)
        h = tf.submit_with_policy(tf.Operation.copy(dst, src), [cpu, dsa], policy=policy)
        assert h.wait().bytes_completed == src.nbytes
        assert (dst == src).all(), policy
    dst = np.zeros_like(src)
    tf.submit_with_policy(tf.Operation.fill(dst, 0x0101010101010101), [cpu, dsa]).wait()
    assert (dst == 1).all()
    with pytest.raises(ValueError, match="one engine"):
        tf.submit_with_policy(tf.Operation.crc32c(src), [cpu])
    with pytest.raises(ValueError):
        tf.submit_with_policy(tf.Operation.copy(dst, src), [cpu], policy="fastest")
    with pytest.raises(tf.Error):
        tf.submit_with_policy(tf.Operation.copy(dst, src), [], policy="single")
