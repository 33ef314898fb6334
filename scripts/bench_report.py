# SPDX-License-Identifier: Apache-2.0
"""Runs the benchmarks with --json and writes their tables: docs/benchmarks.md in full, and the
README's results section (between its bench:begin and bench:end markers) one table per main job.
Numbers are reproduced by this one command, never retyped (`make bench`).

Usage: bench_report.py TIERFLOW [--quick] [--json-dir DIR] [--docs FILE] [--readme FILE]
                       [--from-json DIR] [--only JOB,...] [--python PYTHON]

--quick runs small sizes (a check that every command and table works, not a measurement);
--from-json renders tables from the JSON files a previous run left in DIR without running;
--only runs these jobs again and keeps the other jobs' JSON of a previous run in --json-dir;
--python is the interpreter, with the tierflow package installed, that runs the Python job.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys

# Each job: its name, the command that measures it (the `tierflow` words, or PYTHON_JOB's
# script's arguments), and the quick form.
PYTHON_JOB = "bench/python_bench.py"
JOBS = {
    "qdp": (["qdp", "--json"],
            ["qdp", "--json", "--rows", "1048576", "--iterations", "2", "--warmup", "0"]),
    "sort": (["sort", "--generate", "1GiB", "--memory", "256MiB", "--json"],
             ["sort", "--generate", "64MiB", "--memory", "64MiB", "--json"]),
    "sort_duckdb": (["sort", "--generate", "4GiB", "--memory", "1GiB", "--threads", "2",
                     "--verify", "--compare-duckdb", "--json"],
                    ["sort", "--generate", "64MiB", "--memory", "64MiB", "--threads", "2",
                     "--verify", "--compare-duckdb", "--json"]),
    "sort_blueprint": (["sort", "--generate", "4GiB", "--memory", "1GiB", "--no-floor",
                        "--compare-declared", "3", "--json"],
                       ["sort", "--generate", "64MiB", "--memory", "64MiB", "--no-floor",
                        "--compare-declared", "1", "--json"]),
    "copy": (["bench", "copy", "--sizes", "4KiB,256KiB,1MiB,64MiB,1GiB", "--reps", "10", "--json"],
             ["bench", "copy", "--sizes", "4KiB,1MiB", "--reps", "3", "--json"]),
    "rma": (["bench", "rma", "--offload", "cpu,dsa-model", "--json"],
            ["bench", "rma", "--reps", "1", "--iters", "100", "--sizes", "8,4KiB",
             "--gats-ranks", "2", "--mpi", "openmpi", "--json"]),
    "rma_hosts": (["bench", "rma", "--hosts", "2", "--pool", "--mpi", "mpich", "--json"],
                  ["bench", "rma", "--hosts", "2", "--pool", "--mpi", "mpich", "--reps", "1",
                   "--iters", "100", "--sizes", "8,4KiB", "--json"]),
    "rma_apps": (["bench", "rma", "--apps", "ft,ca", "--coherence", "coherent,noncoherent,simulated",
                  "--offload", "cpu,dsa-model", "--json"],
                 ["bench", "rma", "--apps", "ft,ca", "--ft-class", "S", "--ft-ranks", "2",
                  "--ca-ranks", "2", "--ca-rows", "240", "--ca-cells", "1022", "--ca-iterations",
                  "10", "--reps", "1", "--mpi", "openmpi", "--offload", "cpu", "--json"]),
    "dsort": (["bench", "dsort", "--hosts", "2", "--ranks-per-host", "2", "--mpi", "mpich",
               "--size", "4GiB", "--memory", "256MiB", "--reps", "3", "--json"],
              ["bench", "dsort", "--hosts", "1", "--ranks-per-host", "2", "--mpi", "mpich",
               "--size", "32MiB", "--memory", "32MiB", "--keys", "uniform,equal", "--json"]),
    "coherence": (["bench", "coherence", "--json"],
                  ["bench", "coherence", "--orders", "0,4", "--samples", "5", "--json"]),
    "submit": (["bench", "submit", "--json"], ["bench", "submit", "--samples", "5", "--json"]),
    "cache": (["bench", "cache", "--json"], ["bench", "cache", "--samples", "3", "--json"]),
    "pipes": (["bench", "pipes", "--log-seconds", "3", "--json"],
              ["bench", "pipes", "--size", "64MiB", "--reps", "1", "--transfers", "1000",
               "--log-seconds", "0.2", "--checkpoint-size", "64MiB", "--json"]),
    "python": ([PYTHON_JOB, "--reps", "10", "--json"],
               [PYTHON_JOB, "--quick", "--reps", "1", "--json"]),
}
# Jobs whose command runs more than once: their JSON is the list of every run's document.
REPEAT = {"sort_duckdb": 3}
MAIN_JOBS = ["qdp", "sort", "sort_duckdb", "copy", "rma", "rma_apps", "dsort", "coherence"]


def machine():
    """One line naming the machine, from /proc/cpuinfo and /proc/meminfo."""
    model, flags, cpus = "unknown CPU", set(), 0
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name":
                model, cpus = value.strip(), cpus + 1
            elif key == "flags":
                flags = set(value.split())
    with open("/proc/meminfo") as f:
        mem_kib = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE2"
    return (f"{cpus} vCPUs, {model}, {isa}, {mem_kib / 2**20:.0f} GiB, "
            f"{platform.system()} {platform.release()}")


def command_of(tierflow, python, words):
    """The argv of a job, and how README prints it."""
    if words[0] == PYTHON_JOB:  # the repository's script, from whatever directory this runs in
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", PYTHON_JOB)
        return [python, script, *words[1:], "--tierflow", tierflow], "python " + " ".join(words)
    return [tierflow, *words], "tierflow " + " ".join(words)


def previous_meta(json_dir, only, quick):
    """The meta of the run whose other jobs' JSON --only keeps: same machine, same mode."""
    path = os.path.join(json_dir, "meta.json")
    if not os.path.exists(path):
        sys.exit(f"bench_report: --only keeps a previous run's JSON, but {json_dir} has none: "
                 "run every job first (make bench)")
    with open(path) as f:
        meta = json.load(f)
    if meta["machine"] != machine() or meta["quick"] != quick:
        sys.exit(f"bench_report: the JSON in {json_dir} was measured on {meta['machine']}"
                 f"{' with --quick' if meta['quick'] else ''}; tables of one machine and mode "
                 "only: run every job again (make bench)")
    missing = [n for n in JOBS if n not in only and n not in meta["commands"]]
    if missing:
        sys.exit(f"bench_report: {json_dir} has no JSON of {', '.join(missing)}: add them to "
                 "--only or run every job (make bench)")
    return meta


def run_one(argv, command):
    """One run's JSON text; stderr is captured, not a terminal, so no status line is drawn."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_report: {command} failed ({p.returncode}): {p.stderr}")
    return p.stdout


def run_jobs(tierflow, python, quick, json_dir, only):
    os.makedirs(json_dir, exist_ok=True)
    commands = previous_meta(json_dir, only, quick)["commands"] if only else {}
    for name, (full, small) in JOBS.items():
        if only and name not in only:
            continue
        argv, commands[name] = command_of(tierflow, python, small if quick else full)
        print(f"bench_report: {commands[name]}", file=sys.stderr, flush=True)
        outputs = [run_one(argv, commands[name]) for _ in range(REPEAT.get(name, 1))]
        with open(os.path.join(json_dir, name + ".json"), "w") as f:
            f.write(outputs[0] if name not in REPEAT else
                    "[" + ",\n".join(o.strip() for o in outputs) + "]\n")
    meta = {"commands": commands, "machine": machine(), "quick": quick,
            "date": datetime.date.today().isoformat()}
    with open(os.path.join(json_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)


def load(json_dir):
    docs = {}
    for name in JOBS:
        with open(os.path.join(json_dir, name + ".json")) as f:
            docs[name] = json.load(f)
    with open(os.path.join(json_dir, "meta.json")) as f:
        return docs, json.load(f)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


# --- one function per job: (short table for the README, full tables for docs) ------------------

def qdp_tables(d):
    rows = [[c["name"], f"{c['time_ms_median']:.1f}", f"{c['speedup']:.2f}×",
             f"{c['vs_floor']:.2f}×", f"{c.get('hit_rate', 0):.2f}"] for c in d["configs"]]
    short = table(["configuration", "ms (median)", "vs baseline", "vs storage floor",
                   "cache hit rate"], rows)
    extra = (f"\n\n{d['rows']} rows; slow tier {d['slow_tier']}, fast tier {d['fast_tier']}; "
             f"storage floor {d['storage_floor_ms']:.1f} ms ({d['storage_gbps']:.2f} GB/s).")
    return short, short + extra


def sort_tables(d):
    row = [size(d["bytes"]), size(d["memory_bytes"]), f"{d['sort_ms'] / 1e3:.2f}",
           f"{d['floor_ms'] / 1e3:.2f}", f"{d['vs_floor']:.2f}×", d["runs"],
           f"{d['rss_peak_bytes'] / 2**20:.1f} MiB"]
    short = table(["input", "memory", "sort s", "I/O floor s", "vs floor", "runs", "peak RSS"],
                  [row])
    phases = table(["phase", "ms"], [[p["name"], f"{p['ms']:.1f}"] for p in d["sort_phases"]])
    floor = table(["floor phase", "ms"],
                  [[p["name"], f"{p['ms']:.1f}"] for p in d["floor_phases"]])
    return short, short + "\n\n" + phases + "\n\n" + floor


# The targets of the 4 GiB sort (docs/benchmark-methods.md): each run's ratio
# against its limit, and whether the ratio is at most (or, for DuckDB, at least) the limit.
SORT_DUCKDB_TARGETS = (("sort / I/O floor", lambda r: r["vs_floor"], "≤", 1.3),
                       ("DuckDB sort / tierflow sort", lambda r: r["duckdb_vs_tierflow"],
                        "≥", 4.0),
                       ("temporary peak / input", lambda r: r["temp_peak_bytes"] / r["bytes"],
                        "≤", 1.0),
                       ("peak RSS / --memory",
                        lambda r: r["rss_peak_bytes"] / r["memory_bytes"], "≤", 1.1))


def sort_duckdb_tables(runs):
    rows = [[i + 1, size(r["bytes"]), size(r["memory_bytes"]), f"{r['sort_ms'] / 1e3:.2f}",
             f"{r['floor_ms'] / 1e3:.2f}", f"{r['vs_floor']:.2f}×",
             f"{r['duckdb_sort_ms'] / 1e3:.2f}", f"{r['duckdb_vs_tierflow']:.2f}×",
             f"{r['temp_peak_bytes'] / r['bytes']:.2f}", f"{r['rss_peak_bytes'] / 2**20:.1f} MiB",
             "yes" if r["verified"] and r["duckdb_agrees"] else "no"]
            for i, r in enumerate(runs)]
    short = table(["run", "input", "memory", "sort s", "I/O floor s", "vs floor",
                   "DuckDB sort s", "DuckDB ÷ tierflow", "temp peak ÷ input", "peak RSS",
                   "verified, DuckDB agrees"], rows)
    checks = []
    for name, value, sense, limit in SORT_DUCKDB_TARGETS:
        values = [value(r) for r in runs]
        met = all(v <= limit if sense == "≤" else v >= limit for v in values)
        checks.append([name, " / ".join(f"{v:.2f}" for v in values), f"{sense} {limit:g}",
                       "yes" if met else "no"])
    targets = table(["measure", "each run", "target", "met in every run"], checks)
    return short, short + "\n\n" + targets


def copy_tables(d):
    by_size = {}
    for r in d["baseline"]:
        by_size.setdefault(r["size_bytes"], {})[f"memcpy ×{r['threads']}"] = r["gbps_median"]
    rows_full, rows_short = [], []
    for r in d["configs"]:
        base = by_size.get(r["size_bytes"], {})
        cells = [size(r["size_bytes"]), r["mode"], r["policy"], r["threads"]]
        cells += [f"{base.get(k, 0):.2f}" for k in sorted(base)]
        cells += [f"{r['gbps_median']:.2f}", f"{r['vs_best']:.2f}×",
                  f"{r['vs_best_paired']:.2f}×", r["isa"]]
        rows_full.append(cells)
        if r["mode"] == "single":
            rows_short.append([size(r["size_bytes"])] + [f"{base.get(k, 0):.2f}" for k in
                                                         sorted(base)] +
                              [f"{r['gbps_median']:.2f}", f"{r['vs_best_paired']:.2f}×"])
    keys = sorted(next(iter(by_size.values()), {}))
    short = table(["size"] + [f"{k} GB/s" for k in keys] + ["CPU engine GB/s", "vs best memcpy"],
                  rows_short)
    full = table(["size", "mode", "policy", "workers"] + [f"{k} GB/s" for k in keys] +
                 ["engine GB/s", "vs best", "paired", "kernel"], rows_full)
    return short, full


def rma_row(r, key):
    n = r.get("bytes", r.get("targets", ""))
    offload = ", ".join(f"{mode} {f['us']:.3f}" for mode, f in r.get("offload", {}).items())
    return [r["mpi"], r["window"], r.get("sync", r.get("exchange", "")), r.get("op", ""), n,
            f"{r['with_us']:.3f}", f"{r['without_us']:.3f}", f"{r['ratio']:.2f}", offload,
            "checked" if r["data_checked"] else "WRONG"]


RMA_HEADER = ["MPI", "window", "sync", "op", "bytes", "with µs", "without µs", "ratio",
              "offloaded µs", "data"]


def gats_calls_table(rows):
    out = []
    for r in rows:
        cells = [f"{r['with_' + c + '_us']:.3f} / {r['without_' + c + '_us']:.3f}"
                 for c in ("start", "complete", "post", "wait")]
        out.append([r["mpi"], r["window"], r["targets"]] + cells)
    return table(["MPI", "window", "targets", "start µs", "complete µs", "post µs", "wait µs"],
                 out)


def rma_tables(d):
    smallest = min((r["bytes"] for r in d["rows"] if "bytes" in r), default=0)
    short_rows = [rma_row(r, "rows") for r in d["rows"]
                  if r.get("bytes") == smallest and r.get("op") == "put"]
    short = table(RMA_HEADER, short_rows)
    parts = []
    for key, title in (("rows", "Latency (µs per operation and synchronisation)"),
                       ("bandwidth", "Bandwidth (µs per put, 64 puts per lock or GATS epoch)"),
                       ("two_sided", "Two-sided baselines (µs: half a ping-pong; per message of "
                                     "a window of 64 sends)"),
                       ("creation", "Window creation (µs per creation and free of 64 KiB)")):
        if d.get(key):
            parts.append(f"**{title}**\n\n" + table(RMA_HEADER, [rma_row(r, key) for r in d[key]]))
    if d.get("gats_calls"):
        parts.append("**GATS per call (µs, with / without the library; origin: start, complete; "
                     "slowest target: post, wait)**\n\n" + gats_calls_table(d["gats_calls"]))
    return short, "\n\n".join(parts)


def rma_hosts_tables(d):
    """The rows of a job across hosts: each row's path (pool, mpi, local) beside its MPI."""
    marked = {k: [dict(r, mpi=f"{r['mpi']} ({r['path']})") for r in v]
              for k, v in d.items() if isinstance(v, list)}
    return rma_tables(marked)


def rma_apps_tables(d):
    targets = table(["MPI", "application", "comparison (2 ranks)", "ratio", "target", "met",
                     "computation alone"],
                    [[t["mpi"], t["app"] + (" class " + t["class"] if "class" in t else ""),
                      t["what"], f"{t['ratio']:.2f}×", f"≤ {t['limit']:.2f}",
                      "yes" if t["met"] else "no",
                      f"{t['floor']:.2f}×" if "floor" in t else ""] for t in d["targets"]])
    runs = []
    for r in d["apps"]:
        lib = r["coherence"] if r["with_library"] else "MPI alone"
        if r["with_library"] and r.get("offload", "off") != "off":
            lib += " + offload " + r["offload"]
        runs.append([r["app"] + (" " + r["class"] if "class" in r else ""), r["mpi"],
                     r["ranks"], r["variant"], lib, f"{r['total_s']:.4f}",
                     f"{r['compute_s']:.4f}", f"{r['comm_s']:.4f}", f"{r['sync_s']:.4f}",
                     "verified" if r["verified"] else "WRONG"])
    full = table(["application", "MPI", "ranks", "variant", "library", "total s", "compute s",
                  "comm s", "sync s", "result"], runs)
    return targets, targets + "\n\n" + full


def sort_blueprint_tables(d):
    k = d["compare_declared"]
    arena = next(b for b in d["blueprint"]["bindings"] if b["role"] == "arena")
    row = [size(d["bytes"]), size(d["memory_bytes"]), arena["bound_to"], k["pairs"],
           f"{k['blueprint_sort_ms'] / 1e3:.2f}", f"{k['declared_sort_ms'] / 1e3:.2f}",
           f"{k['blueprint_vs_declared']:.3f} ({k['ratio_min']:.3f} – {k['ratio_max']:.3f})",
           "yes" if k["blueprint_vs_declared"] <= 1.03 else "no"]
    return None, table(["input", "memory", "arena bound to", "pairs", "blueprint s (median)",
                        "declared s (median)", "ratio (min – max)", "≤ 1.03×"], [row])


def dsort_tables(d):
    rows = [[r["mpi"], r["keys"], size(r["bytes"]), r["ranks"], f"{r['sort_ms'] / 1e3:.2f}",
             f"{r['floor_ms'] / 1e3:.2f}", f"{r['vs_floor']:.2f}×",
             f"{r['vs_uniform']:.2f}×" if "vs_uniform" in r else "—",
             f"{r['max_partition_vs_mean']:.3f}", f"{r['temp_peak_bytes'] / 2**20:.1f} MiB",
             f"{r['rss_peak_bytes'] / 2**20:.1f} MiB"] for r in d["rows"]]
    short = table(["MPI", "keys", "input", "ranks", "sort s", "floor s", "vs floor", "vs uniform",
                   "largest partition / mean", "temp peak", "RSS peak"], rows)
    targets = table(["MPI", "keys", "measure", "ratio", "target", "met"],
                    [[t["mpi"], t["keys"], t["what"], f"{t['ratio']:.3f}", f"≤ {t['limit']:.2f}",
                      "yes" if t["met"] else "no"] for t in d["targets"]])
    where = f"{d['where'][0].upper()}{d['where'][1:]}; every output verified."
    return short + "\n\n" + where, short + "\n\n" + where + "\n\n" + targets


def coherence_tables(d):
    orders = sorted({r["order"] for r in d["rows"]})
    lo, hi = orders[0], orders[-1]

    def ns(rows, op, order):
        v = [r["ns_per_line"] for r in rows
             if r["op"] == op and r["order"] == order and r.get("state", "dirty") == "dirty"
             and r.get("layout", "contiguous") == "contiguous"]
        return f"{sorted(v)[len(v) // 2]:.2f}" if v else "—"
    ops = sorted({r["op"] for r in d["rows"]})
    rows = [[op, ns(d["rows"], op, lo), ns(d["rows"], op, hi)] for op in ops]
    rows.append(["pmem_persist (referee)", ns(d["referee"], "pmem_persist", lo),
                 ns(d["referee"], "pmem_persist", hi)])
    header = ["instruction", f"ns/line, {size(4096 << lo)} dirty",
              f"ns/line, {size(4096 << hi)} dirty"]
    short = table(header, rows)
    full_rows = [[r["op"], size(r["size_bytes"]), r["state"], r["layout"], f"{r['p50_us']:.3f}",
                  f"{r['ns_per_line']:.2f}", "yes" if r["flagged"] else ""]
                 for r in d["rows"] + d["referee"]]
    full = table(["op", "size", "state", "layout", "p50 µs", "ns/line", "flagged"], full_rows)
    return short, (f"Line size {d['line_size']} B ({d['line_size_source']}), clock {d['clock']}; "
                   f"auto write-back {d['auto_write_back']}, invalidate "
                   f"{d['auto_invalidate']}.\n\n" + full)


def submit_tables(d):
    keys = [("single_4k_ns_median", "submit + wait of one 4 KiB copy (inline), ns"),
            ("inline_fixed_ns_median", "its fixed cost beyond the copy kernel, ns"),
            ("batch64_4k_gbps_median", "batch of 64 × 4 KiB, GB/s"),
            ("handoff_4k_ns_median", "4 KiB copy handed to a worker, ns"),
            ("split_ns_median", "256 KiB split over the workers and the waiter, ns"),
            ("split_floor_ns_median", "the same split by bare threads, ns"),
            ("fault_guard_ns_median", "fault guard per piece, ns"),
            ("steady_state_allocations", "heap allocations in the timed loops, warm")]
    return None, table(["path", "measured"],
                       [[label, f"{d[k]:.1f}" if isinstance(d[k], float) else d[k]]
                        for k, label in keys if k in d])


def cache_tables(d):
    b = d["baseline"]
    rows = [["hit, 1 thread (ns)", f"{d['hit_ns_median']:.1f}", f"{b['hit_ns_median']:.1f}"],
            ["hits, 1 thread (Mops)", f"{d['hit_mops_1t']:.2f}", f"{b['hit_mops_1t']:.2f}"],
            ["hits, 2 threads (Mops)", f"{d['hit_mops_2t']:.2f}", f"{b['hit_mops_2t']:.2f}"],
            ["miss, excluding the copy (ns)", f"{d['miss_ns_median']:.1f}",
             f"{b['miss_ns_median']:.1f}"]]
    return None, table(["path", "tierflow", "shared_mutex + unordered_map"], rows)


def pipes_tables(d):
    rows = [["file to DRAM through a pipe, GB/s", f"{d['pipe_median_gbps']:.2f}"],
            ["the same reads with liburing directly, GB/s", f"{d['direct_median_gbps']:.2f}"],
            ["pipe ÷ direct", f"{d['pipe_vs_direct']:.2f}×"],
            ["small transfer, future flavour, µs", f"{d['future_us']:.3f}"],
            ["small transfer, pollable flavour, µs", f"{d['pollable_us']:.3f}"]]
    text = table(["measure", "value"], rows) + (
        f"\n\n{size(d['size_bytes'])} file, chunks of {size(d['chunk_bytes'])}, "
        f"queue depth {d['queue_depth']}.")
    if "logging" in d:
        log = d["logging"]
        text += "\n\nLogging: records acknowledged once durable.\n\n" + table(
            ["method", "records/s", "p50 µs", "p99 µs", "records per sync", "write + sync ms",
             "p99 ms", "verified"],
            [[r["method"], f"{r['records_per_s']:.0f}", f"{r['p50_us']:.1f}",
              f"{r['p99_us']:.1f}", f"{r['batch_records']:.1f}", f"{r['sync_ms']:.3f}",
              f"{r['sync_p99_ms']:.3f}", "yes" if r["verified"] else "NO"]
             for r in log["rows"]])
        text += "\n\n" + table(["target", "value", "limit", "met"],
                               [[t["what"], f"{t['value']:.2f}",
                                 ("≥ " if t["kind"] == "min" else "≤ ") + f"{t['limit']:g}",
                                 "yes" if t["met"] else "no"] for t in log["targets"]])
    if "checkpoint" in d:
        ck = d["checkpoint"]
        text += (f"\n\nCheckpoint: {size(ck['bytes'])} in {ck['regions']} files, durable and "
                 "renamed into place.\n\n") + table(
            ["method", "median GB/s", "min – max", "verified"],
            [[r["method"], f"{r['median_gbps']:.3f}",
              f"{min(r['gbps']):.3f} – {max(r['gbps']):.3f}", "yes" if r["verified"] else "NO"]
             for r in ck["rows"]])
        text += "\n\n" + table(["target", "value", "limit", "met"],
                               [[t["what"], f"{t['value']:.3f}", f"≥ {t['limit']:g}",
                                 "yes" if t["met"] else "no"] for t in ck["targets"]])
    return None, text


def python_tables(d):
    keys = [("submit_4k_us_py", "submit + wait of one 4 KiB copy from Python, µs"),
            ("submit_4k_us_cpp", "the same from C++ (bench submit), µs"),
            ("asyncio_copies_per_s", "awaited 4 KiB copies per second (asyncio, 1000 a batch)"),
            ("copy_1g_gbps_py", "1 GiB copy between numpy arrays, 2 workers, GB/s"),
            ("numpy_copyto_gbps", "numpy.copyto on the same arrays, GB/s"),
            ("copy_1g_gbps_py_buffer", "1 GiB copy between tierflow.Buffer memory, GB/s"),
            ("copy_1g_gbps_cpp", "the same in C++ (bench copy --threads 2), GB/s"),
            ("sort_1g_s_py", "tierflow.sort of 1 GiB, s"),
            ("sort_1g_s_cli", "tierflow sort of the same input, s")]
    sp = d.get("spread", {})
    rows = [[label, f"{d[k]:.3f}" if d[k] < 1e4 else f"{d[k]:.0f}",
             f"{sp[k]['min']:.3f} – {sp[k]['max']:.3f}" if k in sp else ""] for k, label in keys]
    targets = table(["target", "value", "limit", "met"],
                    [[t["what"], f"{t['value']:.3f}", ("≤ " if t["kind"] == "max" else "≥ ")
                      + f"{t['limit']:g}", "yes" if t["met"] else "no"] for t in d["targets"]])
    return None, (table(["measure", f"median of {d['reps']}", "min – max"], rows) + "\n\n"
                  + targets)


RENDER = {"qdp": qdp_tables, "sort": sort_tables, "sort_duckdb": sort_duckdb_tables,
          "sort_blueprint": sort_blueprint_tables,
          "copy": copy_tables, "rma": rma_tables,
          "rma_hosts": rma_hosts_tables,
          "rma_apps": rma_apps_tables, "dsort": dsort_tables,
          "coherence": coherence_tables, "submit": submit_tables, "cache": cache_tables,
          "pipes": pipes_tables, "python": python_tables}
TITLES = {"qdp": "Query-driven prefetching", "sort": "External sort against its I/O floor",
          "sort_duckdb": "The sort against DuckDB's external sort, three runs",
          "sort_blueprint": "The sort as a blueprint against its pipes declared one by one",
          "copy": "Copy throughput: the CPU engine against glibc memcpy",
          "rma": "One-sided MPI: libtierflow_rma against the MPI alone",
          "rma_hosts": "One-sided MPI across two hosts with a pool they share (test bed of "
                       "namespaces: an upper bound for a CXL device)",
          "rma_apps": "One-sided MPI applications: NAS FT and the cellular automaton",
          "dsort": "The distributed sort against its I/O and exchange floor",
          "coherence": "Cache-line maintenance against pmem_persist",
          "submit": "The library's cost per operation", "cache": "The offloading cache",
          "pipes": "Data pipes against liburing",
          "python": "The Python package against the C++ library"}


def render(docs, meta):
    head = (f"Machine: {meta['machine']}; {meta['date']}"
            + (" (--quick: small sizes, a check, not a measurement)" if meta["quick"] else ""))
    full, short = [], []
    for name in JOBS:
        s, f = RENDER[name](docs[name])
        command = f"`{meta['commands'][name]}`"
        full.append(f"## {TITLES[name]}\n\n{command}\n\n{f}\n")
        if name in MAIN_JOBS:
            short.append(f"**{TITLES[name]}** — {command}\n\n{s}\n")
    doc = ("# Benchmark results\n\nGenerated by `make bench` (scripts/bench_report.py) from the "
           "benchmarks' `--json`; do not edit by hand. How each benchmark measures: "
           "[benchmark-methods.md](benchmark-methods.md).\n\n" + head + "\n\n" + "\n".join(full))
    readme = head + "\n\n" + "\n".join(short)
    return doc, readme


BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def check_section(path):
    """Refuses, before anything runs, a README without the section to replace."""
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        sys.exit(f"bench_report: {path} has no {BEGIN} ... {END} section to replace: add the two "
                 "lines where the results go")


def replace_section(path, text):
    with open(path) as f:
        old = f.read()
    begin, end = BEGIN, END
    new = old[:old.index(begin) + len(begin)] + "\n" + text + old[old.index(end):]
    with open(path, "w") as f:
        f.write(new)


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("tierflow", nargs="?", default="build/tierflow")
    a.add_argument("--quick", action="store_true")
    a.add_argument("--json-dir", default="build/bench")
    a.add_argument("--from-json")
    a.add_argument("--docs", default="docs/benchmarks.md")
    a.add_argument("--readme", default="README.md")
    a.add_argument("--only", default="")
    a.add_argument("--python", default=os.path.join(".venv", "bin", "python"))
    args = a.parse_args()
    only = [j for j in args.only.split(",") if j]
    unknown = [j for j in only if j not in JOBS]
    if unknown:
        a.error(f"--only: no job {', '.join(unknown)}; the jobs: {', '.join(JOBS)}")
    json_dir = args.from_json or args.json_dir
    check_section(args.readme)
    if not args.from_json:
        run_jobs(args.tierflow, args.python, args.quick, json_dir, only)
    docs, meta = load(json_dir)
    doc, readme = render(docs, meta)
    with open(args.docs, "w") as f:
        f.write(doc)
    replace_section(args.readme, readme)
    print(f"bench_report: wrote {args.docs} and the results of {args.readme}", file=sys.stderr)


if __name__ == "__main__":
    main()
