# SPDX-License-Identifier: Apache-2.0
"""tierflow-dsort-MPI under its MPI's launcher, 4 ranks on this machine: outputs checked here,
independently of the program's own --verify (the partitions concatenated in rank order are the
inputs' records sorted), skewed keys, both formats, bad input, and a rank killed mid-run.

usage: dsort_test.py openmpi|mpich LAUNCHER PROGRAM [case...]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

MPI, LAUNCHER, PROGRAM = sys.argv[1:4]
RANKS = 4


# libtierflow_rma of this MPI (DSORT_RMA_LIBRARY), preloaded where a test asks for it.
RMA_LIBRARY = os.environ.get("DSORT_RMA_LIBRARY", "")


def launch(args, ranks=RANKS, preload=None):
    if MPI == "openmpi":
        cmd = [LAUNCHER, "--oversubscribe", "-np", str(ranks)]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if preload:
            cmd += ["-x", f"LD_PRELOAD={preload}"]
    else:
        cmd = [LAUNCHER, "-n", str(ranks)]
        if preload:
            cmd += ["-genv", "LD_PRELOAD", preload]
    return cmd + [PROGRAM] + args


def run(args, timeout=240, ranks=RANKS, preload=None):
    return subprocess.run(launch(args, ranks, preload), capture_output=True, text=True,
                          timeout=timeout)


def key_of(fmt, record):
    return record[:10] if fmt == "gensort" else int.from_bytes(record[:8], "little")


def records(path, size):
    data = open(path, "rb").read()
    assert len(data) % size == 0, f"{path}: {len(data)} bytes, not whole records"
    return [data[i:i + size] for i in range(0, len(data), size)]


class DsortTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dsort-test-")
        self.out = os.path.join(self.dir, "out")
        os.mkdir(self.out)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_inputs(self, fmt, per_rank):
        size = 100 if fmt == "gensort" else 16
        rng = __import__("random").Random(5)
        inputs = []
        for r in range(RANKS):
            path = os.path.join(self.dir, f"in-{r}")
            # Few distinct keys: ties across ranks and runs.
            recs = [rng.randrange(50).to_bytes(8 if fmt == "u64" else 10, "little" if fmt == "u64"
                                               else "big") + rng.randbytes(size - (8 if fmt == "u64" else 10))
                    for _ in range(per_rank)]
            open(path, "wb").write(b"".join(recs))
            inputs += recs
        return inputs

    def parts(self, fmt):
        size = 100 if fmt == "gensort" else 16
        return [records(os.path.join(self.out, f"part-{r}"), size) for r in range(RANKS)]

    def test_outputs_are_the_inputs_sorted_both_formats(self):
        for fmt in ("u64", "gensort"):
            with self.subTest(fmt=fmt):
                for f in os.listdir(self.out):
                    os.unlink(os.path.join(self.out, f))
                inputs = self.write_inputs(fmt, 30000 if fmt == "u64" else 6000)
                before = {f: open(os.path.join(self.dir, f), "rb").read()
                          for f in os.listdir(self.dir) if f.startswith("in-")}
                p = run(["--input", os.path.join(self.dir, "in-{rank}"), "--dir", self.dir,
                         "--output-dir", self.out, "--format", fmt, "--memory", "32MiB",
                         "--threads", "1", "--verify", "--json", "--quiet"])
                self.assertEqual(p.returncode, 0, p.stderr)
                report = json.loads(p.stdout)
                self.assertTrue(report["verified"])
                self.assertEqual(report["ranks"], RANKS)
                self.assertEqual(report["mpi"], MPI)
                parts = self.parts(fmt)
                joined = [r for part in parts for r in part]
                keys = [key_of(fmt, r) for r in joined]
                self.assertEqual(keys, sorted(keys), "the partitions are not globally sorted")
                self.assertEqual(sorted(joined), sorted(inputs), "records lost or changed")
                self.assertEqual(report["partition_records"], [len(p) for p in parts])
                # Nothing of size beyond --memory: the MPI and the program take a few MiB.
                self.assertLess(report["rss_peak_bytes"], (32 + 12) << 20, "held beyond --memory")
                after = {f: open(os.path.join(self.dir, f), "rb").read() for f in before}
                self.assertEqual(before, after, "an input was modified")
                left = [f for f in os.listdir(self.dir) if f.startswith("tierflow-")]
                self.assertEqual(left, [], "temporary files left behind")

    def test_ranks_without_input(self):
        """One rank's input empty, then every rank's: empty partitions, still verified."""
        rng = __import__("random").Random(9)
        for empty in ({1}, set(range(RANKS))):
            with self.subTest(empty=sorted(empty)):
                for f in os.listdir(self.out):
                    os.unlink(os.path.join(self.out, f))
                inputs = []
                for r in range(RANKS):
                    recs = [] if r in empty else [rng.randbytes(16) for _ in range(3000)]
                    open(os.path.join(self.dir, f"in-{r}"), "wb").write(b"".join(recs))
                    inputs += recs
                p = run(["--input", os.path.join(self.dir, "in-{rank}"), "--dir", self.dir,
                         "--output-dir", self.out, "--memory", "32MiB", "--threads", "1",
                         "--verify", "--json", "--quiet"])
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertTrue(json.loads(p.stdout)["verified"])
                joined = [r for part in self.parts("u64") for r in part]
                keys = [key_of("u64", r) for r in joined]
                self.assertEqual(keys, sorted(keys))
                self.assertEqual(sorted(joined), sorted(inputs))

    def test_one_sided_exchange_sorts_alike(self):
        """MPI_Put into windows, by the MPI alone and with libtierflow_rma preloaded."""
        inputs = self.write_inputs("u64", 40000)
        for preload in [None] + ([RMA_LIBRARY] if RMA_LIBRARY else []):
            with self.subTest(preload=preload):
                for f in os.listdir(self.out):
                    os.unlink(os.path.join(self.out, f))
                p = run(["--input", os.path.join(self.dir, "in-{rank}"), "--dir", self.dir,
                         "--output-dir", self.out, "--memory", "32MiB", "--threads", "1",
                         "--verify", "--exchange", "put", "--json", "--quiet"], preload=preload)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(json.loads(p.stdout)["exchange"], "put")
                joined = [r for part in self.parts("u64") for r in part]
                keys = [key_of("u64", r) for r in joined]
                self.assertEqual(keys, sorted(keys))
                self.assertEqual(sorted(joined), sorted(inputs))
                # Rounds of steps that put into both receive buffers by turns.
                p = run(["--generate", "8MiB", "--dir", self.dir, "--memory", "32MiB",
                         "--threads", "1", "--no-floor", "--verify", "--exchange", "put",
                         "--json", "--quiet"], preload=preload)
                self.assertEqual(p.returncode, 0, p.stderr)
                report = json.loads(p.stdout)
                self.assertGreaterEqual(report["rounds"], 2)
                self.assertTrue(report["verified"])

    def test_skewed_keys_balance_and_verify(self):
        for keys in ("equal", "zipf", "sorted", "uniform"):
            with self.subTest(keys=keys):
                extra = ["--compare-single"] if keys == "uniform" else []
                p = run(["--generate", "4MiB", "--keys", keys, "--dir", self.dir, "--memory",
                         "32MiB", "--threads", "1", "--verify", "--json", "--quiet"] + extra)
                self.assertEqual(p.returncode, 0, p.stderr)
                report = json.loads(p.stdout)
                self.assertTrue(report["verified"])
                self.assertLessEqual(report["max_partition_vs_mean"], 1.2)
                self.assertEqual(report["records"], RANKS * (4 << 20) // 16)
                for key in ("sort_ms", "floor_ms", "vs_floor", "exchange_ms", "temp_peak_bytes",
                            "rss_peak_bytes", "memory_bytes", "bytes"):
                    self.assertIn(key, report)
                if extra:
                    self.assertGreater(report["single_ms"], 0)
                    self.assertAlmostEqual(report["vs_single"],
                                           report["sort_ms"] / report["single_ms"], places=6)
                self.assertEqual(os.listdir(self.dir), ["out"], "temporary files left behind")

    def test_an_existing_output_is_not_overwritten(self):
        keep = os.path.join(self.out, "part-2")
        open(keep, "wb").write(b"mine")
        p = run(["--generate", "1MiB", "--dir", self.dir, "--output-dir", self.out, "--quiet"])
        self.assertEqual(p.returncode, 1)
        self.assertIn("part-2 exists and is not overwritten", p.stderr)
        self.assertEqual(open(keep, "rb").read(), b"mine")
        self.assertEqual(sorted(os.listdir(self.out)), ["part-2"])
        p = run(["--generate", "1MiB", "--dir", self.dir, "--output-dir", self.out, "--quiet",
                 "--overwrite", "--verify"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(os.listdir(self.out)), [f"part-{r}" for r in range(RANKS)])

    def test_bad_input_is_refused_with_the_fix(self):
        odd = os.path.join(self.dir, "odd")
        open(odd, "wb").write(b"x" * 17)
        cases = [
            (["--dir", self.dir], 2, "give exactly one of --generate SIZE and --input FILE"),
            (["--generate", "1MiB", "--input", odd, "--dir", self.dir], 2, "exactly one"),
            (["--input", os.path.join(self.dir, "missing-{rank}"), "--dir", self.dir], 1,
             "cannot read the input"),
            (["--input", odd, "--dir", self.dir], 1, "not a whole number of 16-byte u64"),
            (["--generate", "1MiB", "--dir", os.path.join(self.dir, "nowhere")], 1,
             "is not a directory"),
            (["--generate", "1MiB", "--dir", self.dir, "--output-dir", odd], 1,
             "is not a directory"),
            (["--generate", "64MiB", "--dir", self.dir, "--memory", "17MiB", "--threads", "8"], 1,
             "is too small for 4 ranks sorting 256MiB of u64 records with 8 threads each: give "
             "every rank at least"),
            (["--generate", "1MiB", "--dir", self.dir, "--memory", "lots"], 2, "--memory"),
            (["--generate", "1MiB", "--dir", self.dir, "--keys", "wild"], 2, "--keys"),
            (["--input", odd, "--dir", self.dir, "--compare-single"], 2,
             "--compare-single sorts generated input"),
            (["--generate", "1MiB", "--dir", self.dir, "--exchange", "carrier-pigeon"], 2,
             "--exchange"),
        ]
        for args, code, words in cases:
            with self.subTest(args=args):
                p = run(args + ["--quiet"])
                self.assertEqual(p.returncode, code, p.stderr)
                self.assertIn(words, p.stderr)
                self.assertNotIn("internal", p.stderr.lower())
        self.assertEqual(sorted(os.listdir(self.dir)), ["odd", "out"])

    def test_a_killed_rank_ends_the_job_and_a_rerun_succeeds(self):
        args = ["--generate", "64MiB", "--dir", self.dir, "--output-dir", self.out, "--memory",
                "48MiB", "--threads", "1", "--no-floor"]
        job = subprocess.Popen(launch(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        victim = None
        for _ in range(300):  # until the ranks have started exchanging
            time.sleep(0.05)
            pids = subprocess.run(["pgrep", "-f", f"^{PROGRAM} .*{self.dir}"],
                                  capture_output=True, text=True).stdout.split()
            if len(pids) >= RANKS and any(f.startswith("tierflow-dsort-r")
                                          for f in os.listdir(self.dir)):
                victim = int(pids[-1])
                break
        self.assertIsNotNone(victim, "the ranks did not start")
        time.sleep(0.3)
        os.kill(victim, signal.SIGKILL)
        try:
            job.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            self.fail("the job did not end after a rank was killed")
        self.assertNotEqual(job.returncode, 0)
        self.assertEqual([f for f in os.listdir(self.out) if not ".tierflow-" in f], [],
                         "an output that looks finished after a failed job")
        # The launcher may return while it still ends the other ranks: the rerun comes after
        # (a rank that has exited but is not reaped, a zombie, counts as ended).
        for _ in range(200):
            if subprocess.run(["pgrep", "-r", "RSD", "-f", f"^{PROGRAM} .*{self.dir}"],
                              capture_output=True).returncode != 0:
                break
            time.sleep(0.05)
        p = run(args + ["--verify", "--quiet"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(os.listdir(self.out)), [f"part-{r}" for r in range(RANKS)])
        left = [f for f in os.listdir(self.dir) if f.startswith("tierflow-")]
        self.assertEqual(left, [], "the killed run's files were not removed by the rerun")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)
