# SPDX-License-Identifier: Apache-2.0
"""examples/checkpoint killed at random points: a checkpoint is complete or absent. After every
SIGKILL, each checkpoint-G directory holds all its region files at full size and the latest
restores intact (the program's own check, word by word); the next run restores and writes the
next generation, removing what killed writers left. Nothing under a final name is ever partial.

Usage: checkpoint_kill_test.py PATH/TO/checkpoint
"""
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

PROGRAM = None
MIB = 64
REGIONS = 4


def entries(d):
    return sorted(os.listdir(d))


class CheckpointKill(unittest.TestCase):
    def run_program(self, d, *extra):
        return subprocess.run([PROGRAM, d, str(MIB), *extra], capture_output=True, text=True,
                              timeout=120)

    def assert_complete(self, d):
        for name in entries(d):
            if not name.startswith("checkpoint-"):
                continue
            files = entries(os.path.join(d, name))
            self.assertEqual(files, [f"region-{r}" for r in range(REGIONS)], name)
            for f in files:
                self.assertEqual(os.path.getsize(os.path.join(d, name, f)),
                                 (MIB << 20) // REGIONS, f"{name}/{f} is not whole")

    def test_killed_writers_never_leave_a_partial_checkpoint(self):
        rng = random.Random(int(os.environ.get("CHECKPOINT_KILL_SEED", "7")))
        with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
            first = self.run_program(d)
            self.assertEqual(first.returncode, 0, first.stderr)
            for attempt in range(8):
                p = subprocess.Popen([PROGRAM, d, str(MIB)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                time.sleep(rng.uniform(0.0, 0.3))
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=60)
                self.assert_complete(d)
                self.assertTrue(any(n.startswith("checkpoint-") for n in entries(d)),
                                "the last complete checkpoint is gone")
                check = self.run_program(d, "verify")
                self.assertEqual(check.returncode, 0, check.stderr)
                self.assertIn("intact", check.stdout)
            last = self.run_program(d)
            self.assertEqual(last.returncode, 0, last.stderr)
            names = entries(d)
            self.assertEqual(len(names), 1, f"one checkpoint and nothing else: {names}")
            self.assertRegex(names[0], r"^checkpoint-\d+$")
            self.assert_complete(d)

    def test_a_writer_killed_while_removing_the_old_generation(self):
        # What a writer killed between retiring generation 1 and deleting it leaves: the
        # next run restores generation 2 and removes the rest; nothing partial is named
        # checkpoint-G at any time.
        with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
            self.assertEqual(self.run_program(d).returncode, 0)
            self.assertEqual(self.run_program(d).returncode, 0)
            self.assertEqual(entries(d), ["checkpoint-2"])
            retired = os.path.join(d, "retired-1")
            os.mkdir(retired)
            with open(os.path.join(retired, "region-3"), "wb") as f:
                f.write(b"\0" * 4096)
            self.assert_complete(d)
            p = self.run_program(d)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("restored generation 2", p.stdout)
            self.assertEqual(entries(d), ["checkpoint-3"])

    def test_a_damaged_checkpoint_is_refused_not_restored(self):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
            self.assertEqual(self.run_program(d).returncode, 0)
            region = os.path.join(d, "checkpoint-1", "region-2")
            with open(region, "r+b") as f:
                f.seek(4096)
                f.write(b"\xff" * 8)
            p = self.run_program(d, "verify")
            self.assertEqual(p.returncode, 1)
            self.assertIn("region-2 differs at word 512", p.stderr)
            self.assertIn("damaged", p.stderr)
            os.truncate(region, 4096)
            p = self.run_program(d, "verify")
            self.assertEqual(p.returncode, 1)
            self.assertIn("wrong size", p.stderr)

    def test_bad_arguments(self):
        for args in ([], ["/nonexistent/dir"], ["/var/tmp", "3"], ["/var/tmp", "abc"]):
            p = subprocess.run([PROGRAM, *args], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertTrue(p.stderr.strip(), args)
            self.assertNotIn("Traceback", p.stderr)


if __name__ == "__main__":
    PROGRAM = sys.argv[1]
    unittest.main(argv=sys.argv[:1], verbosity=2)
