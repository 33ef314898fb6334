# SPDX-License-Identifier: Apache-2.0
"""The offloading cache: a range copied to a faster node ahead of use, read through a numpy
view, modified and written back under the dirty-data contract."""
import numpy as np

import tierflow as tf

engine = tf.CpuEngine.create(workers=1)
cache = tf.OffloadCache.create([engine], {0: 64 << 20}, place_on=0)
column = np.arange(1 << 20, dtype=np.uint64)

with cache.access(column) as entry:  # the fill starts now
    entry.wait()
    values = entry.data.view(np.uint64)  # the cached copy, read-only
    print(f"cached on node {entry.node}: sum {int(values.sum())}")
    entry.mutable_data.view(np.uint64)[0] = 42
    entry.mark_dirty()
cache.invalidate(column, dirty="write_back")  # the change reaches the source
print(f"first value after write-back: {column[0]}")
assert column[0] == 42
