# SPDX-License-Identifier: Apache-2.0
"""Bad input to every option of every tierflow command (issue 12): negative, zero, huge, nan/inf,
non-numbers, empty, directories where files belong and files where directories belong,
unwritable paths, unknown words, unknown commands, bad environment variables.

Each case must end in an error: a non-zero exit within the time limit, no signal, a message on
stderr that names the option (or the word) it is about, no "internal" error (those are for
tierflow's own bugs) and no Python traceback (from the plotting or DuckDB helpers).

Usage: cli_bad_input_test.py PATH/TO/tierflow
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TIERFLOW = None
TIMEOUT_S = 60

# Arguments that make each command quick when the option under test is valid.
BASE = {
    ("topology",): [],
    ("bench", "copy"): ["--sizes", "4KiB", "--reps", "1", "--warmup", "0", "--min-round-ms", "1",
                        "--no-progress", "--no-flush"],
    ("bench", "submit"): ["--samples", "3"],
    ("bench", "cache"): ["--samples", "3", "--entries", "64"],
    ("qdp",): ["--rows", "4096", "--chunk-rows", "512", "--iterations", "1", "--warmup", "0",
               "--configs", "all_dram"],
    ("pipes", "explain"): ["--from", "dram:0:1MiB", "--to", "dram:0:1MiB"],
    ("pipes", "copy"): ["--from", "dram:0:1MiB", "--to", "dram:0:1MiB"],
    ("pipes", "calibrate"): ["--bytes", "1MiB", "--output", "/tmp/tierflow-bad-input-cal.json"],
    ("sort",): ["--generate", "1MiB", "--memory", "32MiB", "--no-floor"],
    ("bench", "pipes"): ["--size", "1MiB", "--reps", "1", "--transfers", "10", "--log-seconds",
                         "0", "--checkpoint-size", "0"],
    ("bench", "rma"): ["--reps", "1", "--iters", "10", "--sizes", "1", "--gats-ranks", "2"],
    ("bench", "dsort"): ["--hosts", "1", "--ranks-per-host", "2", "--size", "64KiB", "--memory",
                         "32MiB", "--keys", "uniform"],
}

HUGE = ["99999999999999999999999", "18446744073709551615", "9223372036854775808"]
NOT_NUMBERS = ["abc", "nan", "inf", "-inf", "", "1x", "0x10"]
NEGATIVE = ["-1", "-5"]
INT_BAD = NEGATIVE + HUGE + NOT_NUMBERS + ["1.5", "1e3"]
FLOAT_BAD = NEGATIVE + ["nan", "inf", "-inf", "1e400", "abc", "", "1.2.3"]
SIZE_BAD = NEGATIVE + ["0", "nan", "inf", "abc", "", "1.5.5KiB", "12XB", "1EiB", "18446744073709551615",
                       "99999999999999999999999KiB"]
A_FILE = "/etc/hostname"
MISSING = "/nonexistent-tierflow/x"
DIR_BAD = [A_FILE, MISSING, ""]
FILE_IN_BAD = ["/tmp", MISSING, ""]
PLOT_BAD = ["/nonexistent-tierflow/dir/p.png", "/tmp", "/proc/tierflow.png", "/tmp/tierflow-plot.txt", ""]
WORD_BAD = ["frobnicate", "", ","]

# (command, option) -> invalid values.
CASES = {
    ("topology",): {
        "--xml": FILE_IN_BAD,
        "--tier-config": FILE_IN_BAD,
        "--tiers": ["0=fast", "x", "99=hbm", "-1=hbm", "0-=dram", "=hbm", ""],
        "--sysfs-root": DIR_BAD,
        "--dev-root": DIR_BAD,
    },
    ("bench", "copy"): {
        "--engine": WORD_BAD + ["gpu"],
        "--experiments": WORD_BAD + ["fig9"],
        "--sysfs-root": DIR_BAD,
        "--dev-root": DIR_BAD,
        "--xml": FILE_IN_BAD,
        "--sizes": SIZE_BAD + ["4KiB,,8KiB", "4KiB,"],
        "--mode": WORD_BAD + ["turbo"],
        "--batch": INT_BAD + ["0", "100000"],
        "--threads": INT_BAD + ["100000"],
        "--submitters": INT_BAD + ["0", "100000"],
        "--policy": WORD_BAD + ["random"],
        "--src-node": INT_BAD + ["77"],
        "--dst-node": INT_BAD + ["77"],
        "--reps": INT_BAD + ["0"],
        "--warmup": INT_BAD,
        "--min-round-ms": FLOAT_BAD + ["1e12"],
        "--plot": PLOT_BAD,
    },
    ("bench", "submit"): {
        "--engine": WORD_BAD + ["gpu"],
        "--samples": INT_BAD + ["0", "2", "1002"],
    },
    ("bench", "cache"): {
        "--entries": INT_BAD + ["0", "1"],
        "--entry-size": SIZE_BAD + ["1"],
        "--samples": INT_BAD + ["0", "2", "1002"],
    },
    ("qdp",): {
        "--rows": INT_BAD + ["0", "4294967297", "4294967296"],  # the last: more memory than here
        "--chunk-rows": INT_BAD + ["0", "100", "513", "18446744073709551104"],
        "--selectivity": FLOAT_BAD + ["1.5"],
        "--seed": NEGATIVE + NOT_NUMBERS + ["1.5", "1e3", "99999999999999999999999"],
        "--groups": INT_BAD + ["0", "100000"],
        "--threads-scan-a": INT_BAD + ["0", "100000"],
        "--threads-scan-b": INT_BAD + ["0", "100000"],
        "--threads-aggregate": INT_BAD + ["0", "100000"],
        "--cache-capacity": SIZE_BAD + ["1", "512", "4095", "1048576GiB"],  # a chunk: 4096 bytes
        "--iterations": INT_BAD + ["0", "101"],
        "--warmup": INT_BAD + ["11"],
        "--data-dir": [A_FILE, "/proc", "/proc/tierflow-data", "/nonexistent-tierflow/a/b", ""],
        "--configs": WORD_BAD + ["fast", "all_dram,"],
        "--b-tier": WORD_BAD + ["gpu", "node:99", "node:-1", "node:abc", "node:"],
        "--cache-tier": WORD_BAD + ["storage", "gpu", "node:99"],
        "--a-tier": WORD_BAD + ["gpu", "node:99"],
        "--engine": WORD_BAD + ["gpu"],
        "--queue-depth": INT_BAD + ["0", "4097"],
        "--read-size": SIZE_BAD + ["1000", "2GiB"],
        "--plot": PLOT_BAD,
    },
    ("pipes", "explain"): {
        "--queue-depth": INT_BAD + ["0", "4097"],
        "--chunk": SIZE_BAD + ["1000", "2GiB"],
        "--mechanism": WORD_BAD + ["gpu", "io_uring-read"],
        "--bandwidth-cap": SIZE_BAD + ["1000"],
        "--length": SIZE_BAD + ["2MiB"],
        "--topology-xml": FILE_IN_BAD,
        "--calibration": ["/tmp", "/nonexistent-tierflow/x/c.json", "/etc/hostname", ""],
    },
    ("pipes", "copy"): {
        "--length": SIZE_BAD + ["2MiB"],
        "--chunk": SIZE_BAD,
        "--mechanism": WORD_BAD + ["copy_file_range"],
    },
    ("sort",): {
        "--generate": SIZE_BAD + ["100", "17TiB"],
        "--memory": SIZE_BAD + ["1MiB", "20MiB"],
        "--threads": INT_BAD + ["0", "65"],
        "--compare-declared": INT_BAD + ["0", "101"],
        "--format": WORD_BAD + ["csv"],
        "--dir": DIR_BAD + ["/proc"],
        "--output": ["/tmp", "/nonexistent-tierflow/x/out", "/proc/out", ""],
        "--seed": NEGATIVE + NOT_NUMBERS + ["1.5"],
        "--plot": PLOT_BAD,
    },
    ("bench", "pipes"): {
        "--size": SIZE_BAD + ["1000", "65GiB", "1048577"],
        "--dir": DIR_BAD + ["/proc"],
        "--reps": INT_BAD + ["0", "101"],
        "--transfers": INT_BAD + ["0", "9"],
        "--queue-depth": INT_BAD + ["0", "4097"],
        "--chunk": SIZE_BAD + ["1000", "4097"],
        "--log-seconds": FLOAT_BAD + ["601"],
        "--record-bytes": INT_BAD + ["15", "65537"],
        "--checkpoint-size": NEGATIVE + ["nan", "abc", "", "65GiB", "4KiB", "12KiB"],
        "--checkpoint-regions": INT_BAD + ["0", "65"],
    },
    ("bench", "rma"): {
        "--reps": INT_BAD + ["0", "51"],
        "--iters": INT_BAD + ["0", "9", "1000001"],
        "--sizes": SIZE_BAD + ["65MiB", "1,,2", "1,0"],
        "--gats-ranks": INT_BAD + ["0", "1", "65"],
        "--hosts": INT_BAD + ["0", "1", "9"],
        "--ranks-per-host": INT_BAD + ["0", "9"],
        "--mpi": WORD_BAD + ["lam"],
        "--apps": WORD_BAD + ["lu", "ft,", "FT"],
        "--ft-class": WORD_BAD + ["C", "s", "A,B"],
        "--ft-ranks": INT_BAD + ["0", "65", "2,,4"],
        "--ca-ranks": INT_BAD + ["0", "65"],
        "--ca-rows": INT_BAD + ["0", "1048577"],
        "--ca-cells": INT_BAD + ["0", "1048577"],
        "--ca-iterations": INT_BAD + ["0"],
        "--coherence": WORD_BAD + ["cxl", "coherent,"],
        "--offload": WORD_BAD + ["gpu", "off", "cpu,gpu"],
        "--plot": PLOT_BAD,
    },
    ("bench", "dsort"): {
        "--hosts": INT_BAD + ["0", "9"],
        "--ranks-per-host": INT_BAD + ["0", "17"],
        "--size": SIZE_BAD + ["1000"],
        "--memory": SIZE_BAD + ["16MiB"],
        "--keys": WORD_BAD + ["normal", "uniform,"],
        "--format": WORD_BAD + ["u32"],
        "--exchange": WORD_BAD + ["send"],
        "--threads": INT_BAD + ["0", "257"],
        "--reps": INT_BAD + ["0", "51"],
        "--dir": DIR_BAD + ["/proc"],
        "--mpi": WORD_BAD + ["lam"],
        "--plot": PLOT_BAD,
    },
    ("pipes", "calibrate"): {
        "--dir": DIR_BAD + ["/proc"],
        "--bytes": SIZE_BAD + ["1000", "17GiB"],
        "--output": ["/tmp", "/nonexistent-tierflow/x/c.json", "/proc/c.json", ""],
    },
}

# Whole command lines that are wrong as such, and the word the error must name.
COMMAND_LINES = [
    (["frobnicate"], "frobnicate"),
    (["bench", "dsa"], "dsa"),
    (["bench"], "bench"),
    ([], "topology"),
    (["topology", "extra"], "extra"),
    (["topology", "--frob"], "--frob"),
    (["bench", "copy", "--frob"], "--frob"),
    (["qdp", "--frob"], "--frob"),
    (["qdp", "--rows"], "--rows"),
    (["bench", "copy", "--json", "--csv"], "--csv"),
    (["topology", "--json=abc"], "--json"),
    (["qdp", "--reuse-data"] + BASE[("qdp",)], "--data-dir"),
    (["qdp", "--groups", "1024", "--threads-scan-b", "1024"] + BASE[("qdp",)], "1024"),
    (["bench", "copy", "--experiments", "cpu"] + BASE[("bench", "copy")], "--experiments"),
    (["pipes"], "pipes"),
    (["pipes", "explain", "--to", "dram:0:1MiB"], "--from"),
    (["pipes", "explain", "--from", "ram:0", "--to", "dram:0:1MiB"], "--from"),
    (["pipes", "explain", "--from", "dram:0:1MiB", "--to", "hbm:0"], "--to"),
    (["pipes", "explain", "--from", "dram:0:1MiB", "--to", "node:77"], "--to"),
    (["pipes", "explain", "--from", "dram:0:12XB", "--to", "dram:0"], "--from"),
    (["pipes", "explain", "--from", MISSING, "--to", "dram:0"], "--from"),
    (["pipes", "explain", "--from", "file:" + MISSING, "--to", "dram:0"], MISSING),
    (["pipes", "explain", "--from", "file:/etc/hostname:0:999999", "--to", "dram:0"], "beyond"),
    (["pipes", "explain", "--from", "file:/etc/hostname", "--to", "dram:0", "--mechanism", "cpu"],
     "cpu"),
    (["pipes", "copy", "--from", "dram:0:1MiB", "--to", "file:/etc/hostname"], "/etc/hostname"),
    (["bench", "rma", "--ft-class", "S"], "--apps"),
    (["bench", "rma", "--coherence", "simulated"], "--apps"),
    (["bench", "rma", "--apps", "ft", "--sizes", "8"], "--sizes"),
    (["bench", "rma", "--apps", "ca", "--gats-ranks", "3"], "--gats-ranks"),
    (["bench", "rma", "--apps", "ca", "--hosts", "2"], "--hosts"),
    (["bench", "rma", "--ranks-per-host", "2"], "--hosts"),
    (["bench", "rma", "--pool"], "--hosts"),
    (["bench", "rma", "--apps", "ft", "--pool"], "--pool"),
    (["bench", "rma", "--hosts", "2", "--gats-ranks", "3"], "--gats-ranks"),
    (["bench", "dsort", "--hosts", "1", "--ranks-per-host", "4", "--size", "8KiB"], "--size"),
    (["bench", "dsort", "--hosts", "1", "--size", "64KiB", "--keys", "zipf,zipf"], "--keys"),
    (["sort"], "--generate"),
    (["sort", "--generate", "1MiB", "--input", "/etc/hostname"], "--input"),
    (["sort", "--input", "/etc/hostname", "--memory", "32MiB"], "/etc/hostname"),
    (["sort", "--input", MISSING], "--input"),
    (["pipes", "copy", "--from", "dram:0:1MiB", "--to", "file:/proc"], "/proc"),
]

# Environment variables tierflow reads, with values that are wrong.
ENVIRONMENT = [
    ("TIERFLOW_ISA", "avx1024", ["bench", "submit", "--samples", "3"]),
    ("TIERFLOW_ISA", "AVX2", ["bench", "submit", "--samples", "3"]),
    ("TIERFLOW_ISA", "avx1024", ["topology"]),
    ("TIERFLOW_TIERS", "0=fast", ["topology"]),
    ("TIERFLOW_TIER_CONFIG", "/tmp", ["topology"]),
    ("TIERFLOW_TIER_CONFIG", MISSING, ["topology"]),
]


def run(args, env=None):
    try:
        p = subprocess.run([TIERFLOW, *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                           env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", f"no answer within {TIMEOUT_S} s"


def problems(args, code, out, err, must_name):
    """What is wrong with how tierflow answered bad input (empty list: nothing)."""
    found = []
    if code is None:
        found.append(err)
    elif code < 0:
        found.append(f"killed by signal {-code}")
    elif code == 0:
        found.append("exit 0 on bad input")
    text = out + err
    if "internal" in text.lower() or "please report" in text.lower():
        found.append("an internal error for a user's mistake")
    if "Traceback" in text:
        found.append("a Python traceback")
    if code not in (None, 0) and not err.strip():
        found.append("no message on stderr")
    if code not in (None, 0) and must_name and must_name not in err:
        found.append(f"the message does not name {must_name!r}")
    return [f"tierflow {' '.join(repr(a) for a in args)}: {p} | stderr: {err.strip()[:300]}" for p in found]


class BadInput(unittest.TestCase):
    def check_all(self, jobs):
        """jobs: (args, env, must_name); runs them two at a time and reports every failure."""
        failures = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            futures = {pool.submit(run, args, env): (args, must_name) for args, env, must_name in jobs}
            for f in concurrent.futures.as_completed(futures):
                args, must_name = futures[f]
                failures += problems(args, *f.result(), must_name)
        self.assertEqual(failures, [], "\n" + "\n".join(sorted(failures)))

    def test_every_option_of_every_command(self):
        jobs = []
        for command, options in CASES.items():
            for option, values in options.items():
                for value in values:
                    jobs.append(([*command, *BASE[command], option, value], None, option))
        self.assertGreater(len(jobs), 300)
        self.check_all(jobs)

    def test_unknown_commands_and_malformed_lines(self):
        self.check_all([(args, None, word) for args, word in COMMAND_LINES])

    def test_bad_environment(self):
        jobs = []
        for name, value, args in ENVIRONMENT:
            env = dict(os.environ)
            env[name] = value
            jobs.append((args, env, name))
        self.check_all(jobs)

    def test_plot_path_is_checked_before_the_run(self):
        # A run that would take long: the bad path must be refused at once, not after it.
        code, out, err = run(["qdp", "--rows", "1048576", "--iterations", "100",
                              "--plot", "/nonexistent-tierflow/dir/p.png"])
        self.assertEqual(problems(["qdp", "--plot"], code, out, err, "--plot"), [])
        self.assertEqual(out, "", "nothing ran")

    def test_plot_without_matplotlib_is_refused_before_the_run(self):
        # Security review, item 23: an interpreter without matplotlib is found out at once.
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "python3")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\nexit 1\n")
            os.chmod(fake, 0o755)
            env = dict(os.environ, TIERFLOW_PYTHON=fake)
            args = ["qdp", "--rows", "1048576", "--iterations", "100", "--plot",
                    os.path.join(d, "p.png")]
            code, out, err = run(args, env=env)
            self.assertEqual(problems(args, code, out, err, "matplotlib"), [])
            self.assertEqual(out, "", "nothing ran")

    def test_output_validators_follow_no_link(self):
        # Security review, item 7: checking --output or --plot creates nothing through a link
        # and removes only its own probe.
        with tempfile.TemporaryDirectory() as d:
            target = os.path.join(d, "target")
            link = os.path.join(d, "link.png")
            os.symlink(target, link)
            for args in (["sort", "--generate", "1MiB", "--output", link],
                         ["bench", "copy", "--sizes", "4KiB", "--plot", link]):
                code, out, err = run(args)
                self.assertEqual(problems(args, code, out, err, "symbolic link"), [])
                self.assertFalse(os.path.exists(target), "a file was created through the link")
            kept = os.path.join(d, "kept.png")
            with open(kept, "w") as f:
                f.write("mine")
            code, out, err = run(["bench", "copy", "--sizes", "1GiB,x", "--plot", kept])
            self.assertEqual(Path(kept).read_text(), "mine", "an existing file was changed")

    def test_review_inputs(self):
        # Security review, items 17-21: each refused with the reason, or reported, never a crash,
        # a wrapped number or raw control characters on the terminal.
        with tempfile.TemporaryDirectory() as d:
            xml = os.path.join(d, "bad.xml")
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                                   "cxl-host.xml")) as f:
                text = f.read()
            with open(xml, "w") as f:
                f.write(text.replace('os_index="1"', 'os_index="4294967295"', 1))
            code, out, err = run(["topology", "--xml", xml])
            self.assertEqual(problems(["topology", "--xml"], code, out, err, "os_index 4294967295"),
                             [])
            sysfs = os.path.join(d, "sys")
            for entry in ("dsa99999999999", "wq0.99999999999"):
                os.makedirs(os.path.join(sysfs, "bus", "dsa", "devices", entry))
            code, out, err = run(["topology", "--sysfs-root", sysfs])
            self.assertEqual(code, 0, err)
            self.assertIn("dsa99999999999: its number is out of range", out)
        for args, name in ((["bench", "copy", "--sizes", "18446744073709551619B"], "too large"),
                           (["topology", "--", "x"], "unexpected argument 'x'"),
                           (["topology", "x"], "x"),
                           (["sort", "--generate", "1MiB", "extra"], "extra")):
            code, out, err = run(args)
            self.assertEqual(problems(args, code, out, err, name), [])
        for args in (["bench", "copy", "--sizes", "1\x1b]0;owned\x07KiB"], ["\x1b[2J\rcmd"]):
            code, out, err = run(args)
            self.assertEqual(code, 2)  # the command line is wrong
            self.assertNotIn("\x1b", err, "a control character reached the terminal")
            self.assertIn("\\x1b", err)

    def test_reuse_data_names_what_is_wrong_with_the_files(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "b.u64"))
            open(os.path.join(d, "a.u64"), "wb").close()
            base = ["qdp", "--data-dir", d, "--reuse-data"] + BASE[("qdp",)]
            code, out, err = run(base)
            self.assertEqual(problems(base, code, out, err, "a.u64"), [])
            self.assertIn("empty", err)
            self.assertNotIn("--rows 0", err, "advice that --rows refuses")
            with open(os.path.join(d, "a.u64"), "wb") as f:
                f.write(b"\0" * 4096 * 8)
            code, out, err = run(base)
            self.assertEqual(problems(base, code, out, err, "b.u64"), [])
            self.assertIn("not a regular file", err)


if __name__ == "__main__":
    TIERFLOW = sys.argv[1]
    unittest.main(argv=sys.argv[:1], verbosity=2)
