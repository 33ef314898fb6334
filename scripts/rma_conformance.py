# SPDX-License-Identifier: Apache-2.0
"""Runs one directory of MPICH's test suite (test/mpi/rma) under an MPI with libtierflow_rma
preloaded. A test that fails with the library runs again without it, so that every failure
is told apart: the MPI alone fails it too, or the library broke it (a regression: exit 1).

usage: rma_conformance.py TESTDIR openmpi|mpich LIBRARY OUT.json

A test passes when it exits 0 and prints "No Errors", as MPICH's runtests decides.
RMA_CONFORMANCE_TIMEOUT (seconds, default 60) bounds each run: with more ranks than CPUs
some tests spin in the MPI's own calls for minutes, with or without the library. A job still
running 10 s after its "No Errors" is ended and counted as passed then hung.
RMA_CONFORMANCE_FILTER (a regular expression) runs only the tests whose names match, and
RMA_CONFORMANCE_RANKS=MIN-MAX (or N) only those of that many ranks.
RMA_CONFORMANCE_HOSTS=N runs every test as one job across the N hosts of the test bed in
TIERFLOW_HOSTS (scripts/hosts.sh, docs/hosts.md), launched from host0, its ranks spread over the
hosts (as many per host as it takes); TESTDIR must be shown to every host.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def tests(testdir):
    """(name, ranks, args, env) per line of the testlist, as MPICH's runtests reads it."""
    for line in open(os.path.join(testdir, "testlist")):
        line = line.split("#")[0].strip()
        if not line:
            continue
        fields = line.split()
        args, env = [], {}
        for opt in fields[2:]:
            key, _, value = opt.partition("=")
            if key == "arg":
                args.append(value)
            elif key == "env":
                k, _, v = value.partition("=")
                env[k] = v
        yield line, fields[0], int(fields[1]), args, env


def across_hosts(mpi, ranks):
    """The launcher's prefix for a job across the test bed's hosts, or [] on this machine."""
    hosts = int(os.environ.get("RMA_CONFORMANCE_HOSTS", "0"))
    if hosts < 2:
        return []
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hosts.sh")
    per = -(-ranks // hosts)
    placement = subprocess.run(["bash", script, "mpirun-args", mpi, str(per)], check=True,
                               capture_output=True, text=True).stdout.split()
    launcher = "mpiexec.mpich" if mpi == "mpich" else "mpirun.openmpi"
    # Debian's Open MPI reaches another host's windows through osc/ucx only (docs/hosts.md).
    extra = ["--mca", "osc", "ucx"] if mpi == "openmpi" else []
    return ["bash", script, "run", "host0", launcher] + placement + extra


def command(mpi, ranks, library, env, program, args):
    prefix = across_hosts(mpi, ranks)
    if library:
        # The library's settings reach every rank, on other hosts too.
        env = dict(env, **{k: v for k, v in os.environ.items() if k.startswith("TIERFLOW_RMA_")})
    if mpi == "mpich":
        cmd = (prefix or ["mpiexec.mpich"]) + ["-n", str(ranks)]
        for k, v in env.items():
            cmd += ["-genv", k, v]
        if library:
            cmd += ["-genv", "LD_PRELOAD", library]
    else:
        cmd = (prefix or ["mpirun.openmpi"]) + ["--oversubscribe", "-np", str(ranks)]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"]
        if library:
            cmd += ["-x", f"LD_PRELOAD={library}"]
    return cmd + ["./" + program] + args


def run(testdir, cmd, timeout, grace=10):
    """'pass', 'fail', 'timeout' or 'hung' (the test said "No Errors", then the job did not end
    within `grace` seconds: Debian's MPICH may hang in MPI_Finalize over TCP, docs/hosts.md),
    and the output's end."""
    with tempfile.TemporaryFile(mode="w+", errors="replace") as log:
        p = subprocess.Popen(cmd, cwd=testdir, stdout=log, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        start, said = time.time(), None
        while p.poll() is None:
            time.sleep(0.2)
            now = time.time()
            if said is None:
                log.seek(0)
                said = now if "No Errors" in log.read() else None
            if now - start > timeout or (said is not None and now - said > grace):
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                break
        log.seek(0)
        out = log.read()
    if p.returncode is not None and p.returncode < 0 and -p.returncode == signal.SIGKILL:
        return ("hung" if "No Errors" in out else "timeout"), out[-2000:]
    ok = p.returncode == 0 and "No Errors" in out
    return ("pass" if ok else "fail"), out[-2000:]


def rank_range():
    """(least, most) ranks of the tests to run, from RMA_CONFORMANCE_RANKS."""
    text = os.environ.get("RMA_CONFORMANCE_RANKS", "")
    if not text:
        return 0, sys.maxsize
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not m:
        sys.exit(f"rma_conformance: RMA_CONFORMANCE_RANKS={text!r} is not N or MIN-MAX "
                 "(e.g. 3-8); set it so or unset it")
    return int(m[1]), int(m[2] or m[1])


def main():
    testdir, mpi, library, out_path = sys.argv[1:5]
    timeout = int(os.environ.get("RMA_CONFORMANCE_TIMEOUT", "60"))
    only = re.compile(os.environ.get("RMA_CONFORMANCE_FILTER", ""))
    least, most = rank_range()
    results = []
    for line, program, ranks, args, env in tests(testdir):
        if not only.search(program) or not least <= ranks <= most:
            continue
        if not os.path.exists(os.path.join(testdir, program)):
            results.append({"test": line, "with": "not built"})
            continue
        t0 = time.time()
        r = {"test": line}
        r["with"], output = run(testdir, command(mpi, ranks, library, env, program, args), timeout)
        if r["with"] not in ("pass", "hung"):
            r["output_with"] = output
            r["alone"], r["output_alone"] = run(testdir, command(mpi, ranks, None, env, program,
                                                                 args), timeout)
        r["seconds"] = round(time.time() - t0, 1)
        results.append(r)
        print(f"{r['with']:8} {r.get('alone', ''):8} {r['seconds']:6.1f}s  {line}", flush=True)
    # Passing and then hanging in MPI_Finalize is passing, alone as with the library.
    regressions = [r for r in results
                   if r["with"] not in ("pass", "hung") and r.get("alone") in ("pass", "hung")]
    summary = {
        "mpi": mpi,
        "tests": len(results),
        "pass": sum(r["with"] == "pass" for r in results),
        "passed_then_hung": [r["test"] for r in results if r["with"] == "hung"],
        "fail_alone_too": sum(r["with"] not in ("pass", "hung") and
                              r.get("alone") not in (None, "pass", "hung") for r in results),
        "regressions": [r["test"] for r in regressions],
        "not_built": [r["test"] for r in results if r["with"] == "not built"],
    }
    with open(out_path, "w") as f:
        json.dump({"summary": summary, "results": results}, f, indent=1)
    print(json.dumps(summary, indent=1))
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
