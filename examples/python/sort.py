# SPDX-License-Identifier: Apache-2.0
"""The external sort from Python: generate 64 MiB of 16-byte records, sort them in 64 MiB of
memory, and read the report the CLI prints as JSON."""
import os
import tempfile

import tierflow as tf

with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as d:
    report = tf.sort(os.path.join(d, "in.u64"), os.path.join(d, "out.u64"), memory=64 << 20,
                     generate=64 << 20, verify=True)
    print(f"sorted {report['records']} records in {report['sort_ms']:.0f} ms, "
          f"{report['runs']} runs, verified: {report['verified']}")
    assert report["verified"]
