# SPDX-License-Identifier: Apache-2.0
"""The CLI contract of `tierflow bench rma --hosts`: one job across the hosts of a test bed of
namespaces it brings up and tears down itself (scripts/hosts.sh; root only).

Short runs (one size, few iterations) at 2 hosts x 1 rank under MPICH, with and without a pool:
every row carries the keys of the rows on one machine plus hosts, ranks_per_host and path, its
data checked, and the pool's directory is gone afterwards. At 2 x 2 even the shortest run takes
minutes here (fences of four ranks on two CPUs), beyond make test's budget: docs/rma.md.

Usage: cli_hosts_test.py PATH/TO/tierflow
"""
import glob
import json
import subprocess
import sys
import unittest

TIERFLOW = None
SHORT = ["--mpi", "mpich", "--reps", "1", "--iters", "10", "--sizes", "8"]


def bench(*args):
    p = subprocess.run([TIERFLOW, "bench", "rma", "--hosts", "2", *SHORT, *args],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"bench rma --hosts 2 {' '.join(args)} failed ({p.returncode}): "
                             f"{p.stderr}")
    return p


def pools():
    return set(glob.glob("/dev/shm/tierflow-bench-pool.*"))


class BenchRmaHosts(unittest.TestCase):
    def check_rows(self, doc, path):
        rows = doc["rows"]
        self.assertEqual({r["sync"] for r in rows}, {"pscw", "fence", "lock", "flush"})
        self.assertEqual({r["op"] for r in rows}, {"put", "get", "gats"})
        self.assertEqual({r["window"] for r in rows}, {"create", "allocate"})
        everything = rows + doc["bandwidth"] + doc["creation"] + doc["gats_calls"]
        for r in everything:
            for k in ("mpi", "window", "with_us", "without_us", "ratio", "data_checked"):
                self.assertIn(k, r)
            self.assertEqual((r["mpi"], r["hosts"], r["ranks_per_host"], r["path"]),
                             ("mpich", 2, 1, path), r)
            self.assertTrue(r["data_checked"], r)
            self.assertGreater(r["with_us"], 0)
            self.assertGreater(r["without_us"], 0)
            self.assertAlmostEqual(r["ratio"], r["with_us"] / r["without_us"], places=6)
        for r in rows + doc["bandwidth"]:
            if r["op"] == "gats":
                self.assertEqual(r["targets"], 1, r)
            else:
                # One rank per host: the target, rank 1, is on the other host.
                self.assertEqual((r["bytes"], r["target"]), (8, 1), r)
        self.assertEqual(len([r for r in rows if r["op"] != "gats"]), 2 * 4 * 2)
        self.assertEqual({r["window"] for r in doc["creation"]}, {"create", "allocate"})
        for r in doc["creation"]:
            self.assertNotIn("target", r)

    def test_split_windows_json(self):
        self.check_rows(json.loads(bench("--json").stdout), "mpi")

    def test_pool_json_leaves_no_pool(self):
        before = pools()
        self.check_rows(json.loads(bench("--pool", "--json").stdout), "pool")
        self.assertEqual(pools() - before, set(), "the bench left its pool in /dev/shm")

    def test_text_says_what_is_modelled(self):
        out = bench("--pool").stdout
        self.assertIn("test bed of namespaces on this machine", out)
        self.assertIn("an upper bound for a CXL device", out)
        for heading in ("latency", "bandwidth"):
            self.assertIn(heading, out)
        self.assertIn(" pool ", out)


if __name__ == "__main__":
    TIERFLOW = sys.argv[1]
    unittest.main(argv=sys.argv[:1] + sys.argv[2:], verbosity=2)
