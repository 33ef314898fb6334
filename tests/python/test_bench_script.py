# SPDX-License-Identifier: Apache-2.0
"""bench/python_bench.py's contract: --json with its keys, every target evaluated, run small
(--quick). Needs the CLI: TIERFLOW_CLI (make test-python sets it), else the test is skipped."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "python_bench.py")
CLI = os.environ.get("TIERFLOW_CLI", "")


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="TIERFLOW_CLI names no tierflow CLI")
def test_json_contract(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--tierflow", CLI, "--quick", "--reps", "1",
                        "--dir", str(tmp_path), "--json"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    for k in ("submit_4k_us_py", "submit_4k_us_cpp", "asyncio_copies_per_s", "copy_1g_gbps_py",
              "copy_1g_gbps_cpp", "numpy_copyto_gbps", "sort_1g_s_py", "sort_1g_s_cli"):
        assert r[k] > 0, k
    assert len(r["targets"]) == 5
    for t in r["targets"]:
        assert t["met"] == (t["value"] <= t["limit"] if t["kind"] == "max"
                            else t["value"] >= t["limit"])
    assert os.listdir(tmp_path) == []


def test_bad_arguments_name_the_option(tmp_path):
    for args, word in ((["--reps", "0"], "--reps"), (["--tierflow", "/nonexistent"], "--tierflow"),
                       (["--dir", "/nonexistent"], "--dir")):
        p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
        assert p.returncode == 2 and word in p.stderr, (args, p.stderr)
