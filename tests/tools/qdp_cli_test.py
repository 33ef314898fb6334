# SPDX-License-Identifier: Apache-2.0
"""`tierflow qdp` end to end: the JSON contract, DuckDB as the referee of every sum (random data,
seeds and selectivities, empty and all-pass filters, row counts that are not a multiple of the
chunk), the plot, and bad input. Run by ctest with the project's venv (duckdb, numpy).

Usage: qdp_cli_test.py PATH/TO/tierflow
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

import numpy as np

TIERFLOW = None
CONFIG_NAMES = ["baseline", "upper_limit", "prefetch", "prefetch_distributed", "all_dram"]
SMALL = ["--chunk-rows", "4096", "--iterations", "1", "--warmup", "0"]


def qdp(*args, ok=True, env=None):
    p = subprocess.run([TIERFLOW, "qdp", *args], capture_output=True, text=True, timeout=600, env=env)
    if ok and p.returncode != 0:
        raise AssertionError(f"tierflow qdp {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


class JsonContract(unittest.TestCase):
    def test_every_configuration_and_the_report_fields(self):
        doc = json.loads(qdp("--rows", "100000", *SMALL, "--json").stdout)
        self.assertEqual([c["name"] for c in doc["configs"]], CONFIG_NAMES)
        for c in doc["configs"]:
            for key in ("time_ms_median", "speedup", "hit_rate", "sum"):
                self.assertIn(key, c, c["name"])
            self.assertEqual(c["sum"], doc["expected_sum"], c["name"])
            self.assertGreater(c["time_ms_median"], 0, c["name"])
            self.assertGreater(c["speedup"], 0, c["name"])
            self.assertEqual(c["resident_pages_at_start"], 0, c["name"] + " started warm")
            self.assertGreaterEqual(c["hit_rate"], 0)
            self.assertLessEqual(c["hit_rate"], 1)
            # a floor beside every timed iteration; the ratio is of the two medians
            self.assertEqual(len(c["floor_ms"]), len(c["times_ms"]), c["name"])
            floors = sorted(c["floor_ms"])
            self.assertAlmostEqual(c["vs_floor"], c["time_ms_median"] / floors[len(floors) // 2])
        self.assertEqual(doc["configs"][0]["speedup"], 1.0)
        self.assertGreater(doc["storage_floor_ms"], 0)
        self.assertEqual(doc["storage_floor_ms"], min(doc["floor_samples_ms"]))
        self.assertEqual(len(doc["floor_samples_ms"]), sum(len(c["times_ms"]) for c in doc["configs"]))
        self.assertEqual(doc["prefetch_distributed_vs_floor"], doc["configs"][3]["vs_floor"])
        self.assertAlmostEqual(doc["prefetch_distributed_vs_best_floor"],
                               doc["configs"][3]["time_ms_median"] / doc["storage_floor_ms"])
        self.assertTrue(doc["huge_pages"])
        self.assertLessEqual(doc["fast_tier_peak_bytes"], doc["cache_capacity_bytes"])
        self.assertEqual(doc["slow_tier"], "storage")
        self.assertNotIn("duckdb_ms_median", doc)
        prefetched = doc["configs"][3]
        self.assertEqual(prefetched["hits"] + prefetched["late_hits"] + prefetched["misses"],
                         (100000 + 4095) // 4096)

    def test_four_kib_pages_on_request(self):
        doc = json.loads(qdp("--rows", "20000", *SMALL, "--configs", "prefetch_distributed",
                             "--no-huge-pages", "--json").stdout)
        self.assertFalse(doc["huge_pages"])
        self.assertEqual(doc["configs"][0]["sum"], doc["expected_sum"])

    def test_speedup_is_null_without_a_baseline(self):
        doc = json.loads(qdp("--rows", "20000", *SMALL, "--configs", "all_dram", "--json").stdout)
        self.assertIsNone(doc["configs"][0]["speedup"])


class DuckDbReferee(unittest.TestCase):
    def check(self, rows, selectivity, seed, data_dir=None):
        args = ["--rows", str(rows), "--selectivity", str(selectivity), "--seed", str(seed), *SMALL,
                "--configs", "baseline,prefetch,prefetch_distributed,all_dram", "--compare-duckdb",
                "--json"]
        if data_dir:
            args += ["--data-dir", data_dir]
        doc = json.loads(qdp(*args).stdout)
        what = f"rows {rows} selectivity {selectivity} seed {seed}"
        self.assertEqual(doc["duckdb_sum"], doc["expected_sum"], what)
        for c in doc["configs"]:
            self.assertEqual(c["sum"], doc["duckdb_sum"], f"{c['name']}, {what}")
        self.assertGreater(doc["duckdb_ms_median"], 0)
        self.assertEqual(doc["duckdb_threads"], doc["compute_threads"])
        self.assertAlmostEqual(doc["all_dram_vs_duckdb"],
                               doc["configs"][3]["time_ms_median"] / doc["duckdb_ms_median"])
        return doc

    def test_random_data_seeds_and_selectivities(self):
        rng = random.Random()
        seed = rng.randrange(1 << 30)
        rng.seed(seed)
        print(f"\nDuckDbReferee random seed {seed}", file=sys.stderr)
        for _ in range(3):
            rows = rng.randrange(5000, 150000)  # almost never a multiple of 4096
            self.check(rows, round(rng.random(), 3), rng.randrange(1 << 40))

    def test_empty_and_all_pass_filters(self):
        self.assertEqual(self.check(50000, 0.0, 3)["expected_sum"], 0)
        doc = self.check(50000, 1.0, 4)
        self.assertGreater(doc["expected_sum"], 0)

    def test_row_count_not_a_multiple_of_the_chunk_and_a_third_opinion(self):
        with tempfile.TemporaryDirectory() as d:
            rows = 3 * 4096 + 17
            doc = self.check(rows, 0.37, 11, data_dir=d)
            a = np.fromfile(os.path.join(d, "a.u64"), dtype="<u8")
            b = np.fromfile(os.path.join(d, "b.u64"), dtype="<u8")
            self.assertEqual(a.size, rows)  # the files hold exactly the rows
            by_numpy = sum(int(v) for v in b[a < np.uint64(doc["x"])])
            self.assertEqual(by_numpy, doc["duckdb_sum"])

    def test_without_the_referee_says_how_to_get_it(self):
        env = dict(os.environ, TIERFLOW_PYTHON="/nonexistent/python3")
        p = qdp("--rows", "20000", *SMALL, "--configs", "all_dram", "--compare-duckdb", ok=False, env=env)
        self.assertEqual(p.returncode, 1)
        self.assertIn("make setup", p.stderr)


class Plot(unittest.TestCase):
    def test_png(self):
        with tempfile.TemporaryDirectory() as d:
            png = os.path.join(d, "qdp.png")
            out = qdp("--rows", "50000", *SMALL, "--plot", png).stdout
            self.assertIn("plot: " + png, out)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class BadInput(unittest.TestCase):
    def test_named_errors(self):
        with tempfile.TemporaryDirectory() as d:
            # Exit status 2 for values wrong in themselves, 1 for what this machine or the
            # files refuse when the run starts.
            cases = [
                (["--chunk-rows", "1000"], "multiple of 512 rows", 2),
                (["--cache-capacity", "0"], "at least one chunk of b", 2),
                (["--threads-aggregate", "64"], "more threads than cores", 1),
                (["--b-tier", "node:99"], "--b-tier node:99", 1),
                (["--cache-tier", "storage"], "--cache-tier storage", 1),
                (["--engine", "gpu"], "--engine: unknown engine 'gpu'", 2),
                (["--configs", "fastest"], "unknown configuration 'fastest'", 2),
                (["--reuse-data", "--data-dir", d], "a.u64 is missing", 1),
                (["--read-size", "1000"], "multiple of 4 KiB", 2),
            ]
            for args, text, code in cases:
                p = qdp("--rows", "20000", "--iterations", "1", "--warmup", "0", *args, ok=False)
                self.assertEqual(p.returncode, code, args)
                self.assertIn(text, p.stderr, args)
                self.assertNotIn("Traceback", p.stderr)


if __name__ == "__main__":
    TIERFLOW = sys.argv[1]
    unittest.main(argv=sys.argv[:1], verbosity=2)
