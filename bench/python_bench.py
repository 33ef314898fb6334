# SPDX-License-Identifier: Apache-2.0
"""The Python package against the C++ library, measured in one run (docs/python.md):

- submit + wait of one 4 KiB copy from Python, against `tierflow bench submit`'s figure for the
  same call from C++ (single_4k_ns_median), run by this script;
- 1000 awaited 4 KiB copies per asyncio batch (copies per second);
- a 1 GiB copy between numpy arrays through the CPU engine with 2 workers, against
  numpy.copyto on the same arrays, and the same copy between tierflow.Buffer memory against
  `tierflow bench copy --sizes 1GiB --threads 2` (the C++ engine, on that kind of memory);
- tierflow.sort of 1 GiB against `tierflow sort` on the same input, alternated.

Medians of --reps alternated repetitions, with their spread; the targets take the median of
the ratios within each repetition. Usage:
  python bench/python_bench.py [--tierflow build/tierflow] [--reps 5] [--dir DIR] [--json]
                               [--quick]
--quick: 64 MiB instead of 1 GiB and fewer samples (a check that every measure works, not a
measurement; the keys keep their names).
"""
import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tierflow as tf


def cli(tierflow, *args):
    p = subprocess.run([tierflow, *args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"python_bench: tierflow {' '.join(args)} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def submit_4k_us(engine, samples):
    src, dst = np.ones(4096, np.uint8), np.zeros(4096, np.uint8)
    op = tf.Operation.copy(dst, src)
    for _ in range(1000):
        engine.submit(op).wait()
    t0 = time.perf_counter_ns()
    for _ in range(samples):
        engine.submit(op).wait()
    return (time.perf_counter_ns() - t0) / samples / 1e3


def asyncio_copies_per_s(engine, batches=20):
    srcs = [np.full(4096, i % 256, np.uint8) for i in range(1000)]
    ops = [tf.Operation.copy(np.zeros(4096, np.uint8), s) for s in srcs]

    async def run():
        # A batch: every copy submitted, then each awaited (all are in flight together).
        t0 = time.perf_counter()
        for _ in range(batches):
            for h in [engine.submit(op) for op in ops]:
                await h
        return batches * len(ops) / (time.perf_counter() - t0)

    return asyncio.run(run())


def warm_gbps(nbytes, copy, times=3):
    """GB/s of `copy`: the median of `times` runs after an untimed one, as the C++ benchmark
    warms up before its rounds (the first copy after other work pays for cold TLBs)."""
    copy()
    runs = []
    for _ in range(times):
        t0 = time.perf_counter()
        copy()
        runs.append(nbytes / (time.perf_counter() - t0) / 1e9)
    return statistics.median(runs)


def copy_gbps(engine, src, dst):
    op = tf.Operation.copy(dst, src)
    return warm_gbps(len(src), lambda: engine.submit(op).wait())


def copyto_gbps(src, dst):
    return warm_gbps(src.nbytes, lambda: np.copyto(dst, src))


def sort_pair(tierflow, d, rep, memory):
    """Seconds of tierflow.sort and of the CLI on the same input; which goes first alternates."""
    inp = os.path.join(d, "in.u64")
    out_py, out_cli = os.path.join(d, f"py{rep}.u64"), os.path.join(d, f"cli{rep}.u64")

    def py():
        t0 = time.perf_counter()
        tf.sort(inp, out_py, memory=memory, verify=False, threads=2)
        return time.perf_counter() - t0

    def command():
        t0 = time.perf_counter()
        cli(tierflow, "sort", "--input", inp, "--output", out_cli, "--memory", str(memory),
            "--threads", "2", "--no-floor", "--json", "--quiet")
        return time.perf_counter() - t0

    if rep % 2 == 0:
        a = py()
        b = command()
    else:
        b = command()
        a = py()
    os.unlink(out_py)
    os.unlink(out_cli)
    return a, b


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def paired(a, b):
    """The median over repetitions of a / b measured in the same repetition: drift of a shared
    machine between repetitions moves both sides alike and cancels."""
    return statistics.median(x / y for x, y in zip(a, b))


def measure(args):
    engine = tf.CpuEngine.create(workers=2)
    size = 64 << 20 if args.quick else 1 << 30
    memory = 64 << 20 if args.quick else 256 << 20
    r = {"reps": args.reps, "bytes": size, "quick": args.quick}
    py_submit, cpp_submit, aio, py_copy, cpp_copy, numpy_copy = [], [], [], [], [], []
    src, dst = np.ones(size, np.uint8), np.empty(size, np.uint8)
    dst.fill(0)  # every page mapped before any copy is timed, as the C++ benchmark's are
    # The C++ benchmark's memory (tierflow.Buffer: 4 KiB pages, prefaulted); numpy asks for
    # transparent huge pages for arrays this large, so both are measured.
    bsrc, bdst = tf.Buffer.on_node(0, size), tf.Buffer.on_node(0, size)
    np.asarray(bsrc).fill(1)
    py_buffer = []
    for _ in range(args.reps):
        py_submit.append(submit_4k_us(engine, 2001 if args.quick else 20001))
        cpp_submit.append(cli(args.tierflow, "bench", "submit", "--json")["single_4k_ns_median"] / 1e3)
        aio.append(asyncio_copies_per_s(engine))
        py_copy.append(copy_gbps(engine, src, dst))
        py_buffer.append(copy_gbps(engine, bsrc, bdst))
        numpy_copy.append(copyto_gbps(src, dst))
        c = cli(args.tierflow, "bench", "copy", "--sizes", str(size), "--threads", "2", "--reps", "1",
                "--json", "--no-progress")
        cpp_copy.append(c["configs"][0]["gbps_median"])
    del src, dst, bsrc, bdst
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        tf.sort(os.path.join(d, "seed.u64"), os.path.join(d, "in.u64"), memory=memory,
                generate=size, verify=False)
        os.unlink(os.path.join(d, "seed.u64"))
        sorts = [sort_pair(args.tierflow, d, rep, memory) for rep in range(args.reps)]
    r.update(submit_4k_us_py=statistics.median(py_submit),
             submit_4k_us_cpp=statistics.median(cpp_submit),
             asyncio_copies_per_s=statistics.median(aio),
             copy_1g_gbps_py=statistics.median(py_copy),
             copy_1g_gbps_py_buffer=statistics.median(py_buffer),
             copy_1g_gbps_cpp=statistics.median(cpp_copy),
             numpy_copyto_gbps=statistics.median(numpy_copy),
             sort_1g_s_py=statistics.median(s[0] for s in sorts),
             sort_1g_s_cli=statistics.median(s[1] for s in sorts))
    r["spread"] = {"submit_4k_us_py": spread(py_submit), "copy_1g_gbps_py": spread(py_copy),
                   "copy_1g_gbps_py_buffer": spread(py_buffer), "numpy_copyto_gbps": spread(numpy_copy),
                   "copy_1g_gbps_cpp": spread(cpp_copy), "sort_1g_s_py": spread([s[0] for s in sorts]),
                   "sort_1g_s_cli": spread([s[1] for s in sorts])}
    r["targets"] = [
        {"what": "submit + wait 4 KiB: Python - C++ (µs)",
         "value": r["submit_4k_us_py"] - r["submit_4k_us_cpp"], "limit": 1.5, "kind": "max"},
        {"what": "asyncio: awaited 4 KiB copies per second",
         "value": r["asyncio_copies_per_s"], "limit": 200000, "kind": "min"},
        # Like for like: the same engine on the same kind of memory, so the ratio is the
        # binding's cost (numpy's arrays, on huge pages, are also shown against it).
        {"what": "1 GiB copy: Python / C++ engine (Buffer memory, paired)",
         "value": paired(py_buffer, cpp_copy), "limit": 0.97,
         "kind": "min"},
        {"what": "1 GiB copy: Python / numpy.copyto (paired)",
         "value": paired(py_copy, numpy_copy), "limit": 1.3, "kind": "min"},
        {"what": "sort 1 GiB: Python / CLI (paired)",
         "value": paired([s[0] for s in sorts], [s[1] for s in sorts]), "limit": 1.05,
         "kind": "max"},
    ]
    for t in r["targets"]:
        t["met"] = t["value"] <= t["limit"] if t["kind"] == "max" else t["value"] >= t["limit"]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tierflow", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                       "tierflow"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/var/tmp"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.reps < 1 or args.reps > 100:
        ap.error("--reps: give 1 to 100")
    if not os.access(args.tierflow, os.X_OK):
        ap.error(f"--tierflow: {args.tierflow} is not an executable: build it (make build)")
    if not os.path.isdir(args.dir):
        ap.error(f"--dir: {args.dir} is not a directory")
    r = measure(args)
    if args.json:
        print(json.dumps(r, indent=1))
        return
    for k in ("submit_4k_us_py", "submit_4k_us_cpp", "asyncio_copies_per_s", "copy_1g_gbps_py",
              "copy_1g_gbps_py_buffer", "copy_1g_gbps_cpp", "numpy_copyto_gbps", "sort_1g_s_py", "sort_1g_s_cli"):
        print(f"{k:24} {r[k]:12.3f}")
    for t in r["targets"]:
        sign = "<=" if t["kind"] == "max" else ">="
        print(f"{t['what']:44} {t['value']:10.3f} {sign} {t['limit']}  "
              f"{'met' if t['met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
