# SPDX-License-Identifier: Apache-2.0
"""Plots `tierflow sort --json` results: the sort's phases against the I/O floor's phases
measured in the same run, and DuckDB's sort time when it was compared.
Usage: plot_sort.py RESULTS.json OUT.png"""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError as missing:
    sys.exit(f"plot_sort.py needs matplotlib ({missing}): run 'make setup' in tierflow's "
             f"source tree, or install them for {sys.executable} (TIERFLOW_PYTHON chooses the "
             "interpreter)")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_sort.py RESULTS.json OUT.png")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    bars = [("I/O floor", doc.get("floor_phases", [])), ("tierflow sort", doc["sort_phases"])]
    if "duckdb_sort_ms" in doc:
        bars.append(("DuckDB " + doc.get("duckdb_version", ""),
                     [{"name": "sort (load excluded)", "ms": doc["duckdb_sort_ms"]}]))
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for y, (label, phases) in enumerate(bars):
        left = 0.0
        for p in phases:
            ax.barh(y, p["ms"] / 1e3, left=left, edgecolor="black")
            ax.text(left + p["ms"] / 2e3, y, p["name"], ha="center", va="center", fontsize=8)
            left += p["ms"] / 1e3
    ax.set_yticks(range(len(bars)), [b[0] for b in bars])
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title(f"tierflow sort: {doc['records']} records, {doc['bytes'] / 2**30:.2f} GiB, "
                 f"--memory {doc['memory_bytes'] / 2**20:.0f} MiB; sort/floor "
                 f"{doc['vs_floor'] or float('nan'):.2f}", fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
