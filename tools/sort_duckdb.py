# SPDX-License-Identifier: Apache-2.0
"""DuckDB as the referee of `tierflow sort`: sorts the same records with the same threads,
memory_limit and a temp_directory on the same disk, and checks that it agrees with tierflow.

The records are loaded into a DuckDB database file beside the input first (timed apart: the
load is not the sort); the sort is CREATE TABLE s AS SELECT * FROM t ORDER BY key. Agreement:
the same keys in the same order as tierflow's output, and the same sum of payloads.

Prints one JSON object: load_ms, sort_ms, agrees, temp_peak_bytes (DuckDB's temporary files at
their largest, sampled), version.

Usage: sort_duckdb.py INPUT OUTPUT FORMAT(u64|gensort) MEMORY_BYTES THREADS WORK_DIR
"""
import json
import os
import sys
import threading
import time

try:
    import duckdb
    import numpy as np
except ImportError as missing:
    sys.exit(f"sort_duckdb.py needs duckdb and numpy ({missing}): run 'make setup' in tierflow's "
             f"source tree, or install them for {sys.executable} (TIERFLOW_PYTHON chooses the "
             "interpreter)")


def records(path, fmt):
    if fmt == "u64":
        return np.memmap(path, dtype=[("k", "<u8"), ("p", "<u8")], mode="r")
    raw = np.memmap(path, dtype=np.uint8, mode="r").reshape(-1, 100)
    hi = raw[:, :8].copy().view(">u8").reshape(-1).astype("<u8")
    lo = (raw[:, 8].astype("<u8") << 8) | raw[:, 9].astype("<u8")
    rest = raw[:, 10:18].copy().view("<u8").reshape(-1)
    return hi, lo, rest


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


def load(con, path, fmt, chunk=1 << 24):
    """Appends the records in slices, so that Python never holds all of them at once."""
    if fmt == "u64":
        con.execute("CREATE TABLE t (k UBIGINT, p UBIGINT)")
        recs = records(path, fmt)
        for i in range(0, len(recs), chunk):
            part = {"k": np.asarray(recs["k"][i:i + chunk]), "p": np.asarray(recs["p"][i:i + chunk])}
            con.execute("INSERT INTO t SELECT k, p FROM part")
        return "k", "p"
    # The whole 100-byte record: the key as k (bytes 0-7, big-endian) and k2 (bytes 8-9), the
    # other 90 bytes as eleven UBIGINTs and a USMALLINT, so that DuckDB moves what tierflow moves.
    rest = ", ".join(f"r{i} UBIGINT" for i in range(11))
    con.execute(f"CREATE TABLE t (k UBIGINT, k2 USMALLINT, {rest}, r11 USMALLINT)")
    raw = np.memmap(path, dtype=np.uint8, mode="r").reshape(-1, 100)
    for i in range(0, len(raw), chunk // 8):
        r = np.asarray(raw[i:i + chunk // 8])
        part = {"k": r[:, :8].copy().view(">u8").reshape(-1).astype("<u8"),
                "k2": ((r[:, 8].astype("<u2") << 8) | r[:, 9]).astype("<u2")}
        words = r[:, 10:98].copy().view("<u8")
        for j in range(11):
            part[f"r{j}"] = np.ascontiguousarray(words[:, j])
        part["r11"] = r[:, 98:100].copy().view("<u2").reshape(-1)
        con.execute("INSERT INTO t SELECT * FROM part")  # columns in the table's order
    return "k, k2", None


def agrees(con, output, fmt, chunk=1 << 24):
    """DuckDB's sorted keys equal tierflow's output, slice by slice (rows of s are in the order
    the sort inserted them)."""
    ours = records(output, fmt)
    keys = ours["k"] if fmt == "u64" else ours[0]
    n = len(keys)
    if con.execute("SELECT count(*) FROM s").fetchone()[0] != n:
        return False
    for i in range(0, n, chunk):
        theirs = con.execute(f"SELECT k FROM s WHERE rowid >= {i} AND rowid < {i + chunk} "
                             "ORDER BY rowid").fetchnumpy()["k"]
        if not np.array_equal(np.asarray(keys[i:i + chunk]), np.asarray(theirs)):
            return False
    return True


def main():
    if len(sys.argv) != 7:
        sys.exit("usage: sort_duckdb.py INPUT OUTPUT FORMAT MEMORY_BYTES THREADS WORK_DIR")
    path, output, fmt, memory, threads, work = sys.argv[1:]
    memory, threads = int(memory), int(threads)
    db = os.path.join(work, "duckdb-referee.db")
    tmp = os.path.join(work, "duckdb-referee.tmp")
    for p in (db, db + ".wal"):
        if os.path.exists(p):
            os.remove(p)
    try:
        con = duckdb.connect(db)
        con.execute(f"SET threads = {threads}")
        con.execute(f"SET memory_limit = '{memory}B'")
        con.execute(f"SET temp_directory = '{tmp}'")
        con.execute("SET preserve_insertion_order = true")
        t0 = time.perf_counter()
        key, _ = load(con, path, fmt)
        con.execute("CHECKPOINT")
        load_ms = (time.perf_counter() - t0) * 1e3
        peak = [0]
        done = threading.Event()

        def sample():
            while not done.wait(0.2):
                peak[0] = max(peak[0], dir_bytes(tmp))

        sampler = threading.Thread(target=sample)
        sampler.start()
        t1 = time.perf_counter()
        con.execute(f"CREATE TABLE s AS SELECT * FROM t ORDER BY {key}")
        sort_ms = (time.perf_counter() - t1) * 1e3
        done.set()
        sampler.join()
        ok = agrees(con, output, fmt)
        con.close()
    finally:
        for p in (db, db + ".wal"):
            if os.path.exists(p):
                os.remove(p)
    print(json.dumps({"load_ms": load_ms, "sort_ms": sort_ms, "agrees": bool(ok),
                      "temp_peak_bytes": peak[0], "version": duckdb.__version__}))


if __name__ == "__main__":
    main()
