# SPDX-License-Identifier: Apache-2.0
"""A copy onto the fastest tier there is (HBM or CXL where the machine has them, else DRAM),
checked with a compare on the engine: the first steps with tierflow from Python."""
import numpy as np

import tierflow as tf

topology = tf.Topology.discover()
for node in topology.nodes:
    print(f"node {node.os_index}: {node.kind} ({node.kind_reason})")
kinds = {n.kind for n in topology.nodes}
kind = next(k for k in ("hbm", "cxl", "dram") if k in kinds)
engine = tf.CpuEngine.create(topology, workers=2)

src = np.random.default_rng(0).integers(0, 255, 64 << 20, dtype=np.uint8)
dst = tf.Buffer.on_tier(topology, kind, 0, src.nbytes)
done = engine.submit(tf.Operation.copy(dst, src)).wait()
same = engine.submit(tf.Operation.compare(dst, src)).wait()
print(f"copied {done.bytes_completed} bytes onto {kind} node {dst.node}; equal: {same.equal}")
assert same.equal
