# SPDX-License-Identifier: Apache-2.0
"""scripts/bench_report.py end to end, on small sizes: every benchmark's JSON becomes its table
in the docs file, the README's results section is replaced (and only it), and the same JSON
renders the same text again.

Usage: bench_report_test.py PATH/TO/tierflow
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TIERFLOW = None
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "bench_report.py")


class BenchReport(unittest.TestCase):
    def test_quick_run_writes_every_table(self):
        with tempfile.TemporaryDirectory() as d:
            readme, docs, json_dir = (os.path.join(d, n) for n in ("R.md", "b.md", "json"))
            with open(readme, "w") as f:
                f.write("# before\n<!-- bench:begin -->\nold\n<!-- bench:end -->\nafter\n")
            p = subprocess.run([sys.executable, SCRIPT, TIERFLOW, "--quick", "--json-dir",
                                json_dir, "--docs", docs, "--readme", readme, "--python",
                                sys.executable], capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(docs) as f:
                doc = f.read()
            with open(readme) as f:
                text = f.read()
            for title in ("Query-driven prefetching", "External sort", "Copy throughput",
                          "DuckDB's external sort, three runs",
                          "The sort as a blueprint",
                          "One-sided MPI", "One-sided MPI applications", "Cache-line maintenance",
                          "cost per operation",
                          "offloading cache", "Data pipes", "distributed sort",
                          "Python package against the C++ library"):
                self.assertIn(title, doc)
            self.assertTrue(text.startswith("# before\n<!-- bench:begin -->\nMachine: "))
            self.assertTrue(text.endswith("<!-- bench:end -->\nafter\n"))
            self.assertNotIn("\nold\n", text)
            self.assertIn("`tierflow qdp --json", text)  # each table beside its command
            self.assertIn("| baseline |", text)
            # A repeated job keeps every run and shows each, with the targets over all of them.
            with open(os.path.join(json_dir, "sort_duckdb.json")) as f:
                runs = json.load(f)
            self.assertEqual(len(runs), 3)
            self.assertTrue(all(r["verified"] and r["duckdb_agrees"] for r in runs))
            for run in (1, 2, 3):
                self.assertIn(f"\n| {run} | 64 MiB | 64 MiB |", text)
            self.assertIn("| DuckDB sort / tierflow sort |", doc)
            again = os.path.join(d, "again.md")
            subprocess.run([sys.executable, SCRIPT, "--from-json", json_dir, "--docs", again,
                            "--readme", readme], check=True, capture_output=True)
            with open(again) as f:
                self.assertEqual(f.read(), doc)
            self.only_runs_the_jobs_named(json_dir, d)

    def only_runs_the_jobs_named(self, json_dir, d):
        before = {n: os.stat(os.path.join(json_dir, n)).st_mtime_ns for n in os.listdir(json_dir)}
        readme = os.path.join(d, "R.md")
        p = subprocess.run([sys.executable, SCRIPT, TIERFLOW, "--quick", "--only", "submit",
                            "--json-dir", json_dir, "--docs", os.path.join(d, "c.md"),
                            "--readme", readme], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        after = {n: os.stat(os.path.join(json_dir, n)).st_mtime_ns for n in os.listdir(json_dir)}
        changed = sorted(n for n in after if after[n] != before[n])
        self.assertEqual(changed, ["meta.json", "submit.json"])
        for bad, why in ((["--only", "nosuch"], "no job nosuch"),
                         (["--only", "submit", "--json-dir", os.path.join(d, "none")],
                          "run every job first"),
                         (["--only", "submit"], "with --quick")):  # a full run keeps no quick JSON
            args = [sys.executable, SCRIPT, TIERFLOW, "--docs", os.path.join(d, "c.md"),
                    "--readme", readme, "--json-dir", json_dir, *bad]
            p = subprocess.run(args, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(why, p.stderr)

    def test_a_readme_without_the_section_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            readme = os.path.join(d, "R.md")
            with open(readme, "w") as f:
                f.write("# no section\n")
            os.makedirs(os.path.join(d, "json"))
            p = subprocess.run([sys.executable, SCRIPT, "--from-json", os.path.join(d, "json"),
                                "--docs", os.path.join(d, "b.md"), "--readme", readme],
                               capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("bench:begin", p.stderr)


if __name__ == "__main__":
    TIERFLOW = sys.argv[1]
    unittest.main(argv=sys.argv[:1], verbosity=2)
