# SPDX-License-Identifier: Apache-2.0
"""DuckDB as the referee of `tierflow qdp`: loads the same column files into an in-memory DuckDB
table and runs SELECT SUM(b) FROM t WHERE a < x with the same number of threads.

Prints one JSON object: the sum (0 for an empty filter, where SQL's SUM is NULL), the query's
times (data already in DuckDB's memory; loading is timed apart), the median, DuckDB's version.

Usage: qdp_duckdb.py A.u64 B.u64 ROWS X THREADS ITERATIONS WARMUP
"""
import json
import sys
import time

try:
    import duckdb
    import numpy as np
except ImportError as missing:
    sys.exit(f"qdp_duckdb.py needs duckdb and numpy ({missing}): run 'make setup' in tierflow's "
             f"source tree, or install them for {sys.executable} (TIERFLOW_PYTHON chooses the "
             "interpreter)")


def main():
    if len(sys.argv) != 8:
        sys.exit("usage: qdp_duckdb.py A.u64 B.u64 ROWS X THREADS ITERATIONS WARMUP")
    a_path, b_path = sys.argv[1], sys.argv[2]
    rows, x, threads, iterations, warmup = (int(v) for v in sys.argv[3:])
    if rows < 1 or threads < 1 or iterations < 1 or warmup < 0:
        sys.exit(f"qdp_duckdb.py: bad arguments {sys.argv[3:]}")
    columns = {}
    for name, path in (("a", a_path), ("b", b_path)):
        col = np.fromfile(path, dtype="<u8", count=rows)
        if col.size != rows:
            sys.exit(f"qdp_duckdb.py: {path} holds {col.size} rows, fewer than {rows}")
        columns[name] = col
    con = duckdb.connect(":memory:")
    con.execute(f"SET threads = {threads}")
    t0 = time.perf_counter()
    con.execute("CREATE TABLE t AS SELECT a, b FROM columns")
    load_ms = (time.perf_counter() - t0) * 1e3
    del columns
    query = f"SELECT SUM(b) FROM t WHERE a < {x}"
    times = []
    result = None
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        result = con.execute(query).fetchone()[0]
        ms = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            times.append(ms)
    total = 0 if result is None else int(result)
    ordered = sorted(times)
    print(json.dumps({
        "sum": total,
        "times_ms": times,
        "ms_median": ordered[len(ordered) // 2],
        "load_ms": load_ms,
        "threads": threads,
        "query": query,
        "duckdb_version": duckdb.__version__,
    }))


if __name__ == "__main__":
    main()
