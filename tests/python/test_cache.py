# SPDX-License-Identifier: Apache-2.0
"""tierflow.OffloadCache from Python: hits and misses, numpy views of entries, the dirty-data
contract, context-manager use, lifetimes, bad input."""
import gc

import numpy as np
import pytest

import tierflow as tf


@pytest.fixture()
def cache():
    engine = tf.CpuEngine.create(workers=1)
    return tf.OffloadCache.create([engine], {0: 16 << 20}, place_on=0)


def test_access_fills_then_hits(cache):
    src = np.arange(1 << 20, dtype=np.uint8)
    with cache.access(src) as e:
        e.wait()
        assert e.cached and e.node == 0 and e.size == src.nbytes
        assert (e.data == src).all()
        assert not e.data.flags.writeable
        assert e.data.ctypes.data != src.ctypes.data  # the copy, not the source
    with cache.access(src) as e:
        e.wait()
    s = cache.stats[0]
    assert (s["misses"], s["hits"] + s["late_hits"]) == (1, 1)
    assert s["bytes_used"] >= src.nbytes


def test_dirty_data_is_never_dropped_silently(cache):
    src = np.zeros(1 << 16, np.uint8)
    e = cache.access(src)
    e.wait()
    e.mutable_data[:4] = 9
    e.mark_dirty()
    assert e.dirty
    e.release()
    with pytest.raises(tf.Error, match="dirty"):
        cache.invalidate(src)
    assert cache.invalidate(src, dirty="write_back") == 1
    assert list(src[:5]) == [9, 9, 9, 9, 0]  # written back to the source


def test_entry_outlives_the_cache_object():
    engine = tf.CpuEngine.create(workers=1)
    c = tf.OffloadCache.create([engine], {0: 4 << 20}, place_on=0)
    src = np.full(4096, 5, np.uint8)
    e = c.access(src)
    del c, engine
    gc.collect()
    e.wait()
    assert (e.data == 5).all()
    view = e.data
    del e
    gc.collect()
    assert (view == 5).all()  # the view keeps the entry, the entry the cache


def test_released_entry_and_bad_input(cache):
    src = np.zeros(4096, np.uint8)
    with cache.access(src) as e:
        pass
    with pytest.raises(ValueError, match="released"):
        e.data
    with pytest.raises(ValueError, match="dirty='keep'"):
        cache.invalidate(src, dirty="keep")
    with pytest.raises(ValueError, match="src: it is not C-contiguous"):
        cache.access(np.zeros((8, 8), np.uint8)[:, 0])
    with pytest.raises(ValueError):
        tf.OffloadCache.create([], {0: 1 << 20})
    with pytest.raises(ValueError):
        tf.OffloadCache.create([tf.CpuEngine.create(workers=1)], {0: 1 << 20},
                               copy_policy="fastest")
    cache.wait_for_fills()
    assert cache.clear() >= 0
