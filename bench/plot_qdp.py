# SPDX-License-Identifier: Apache-2.0
"""Plots `tierflow qdp --json` results like Figures 6.1/6.2 of the thesis: per configuration the
query's time and each pipeline's busy time (SCAN_a, SCAN_b, AGGREGATE), with the slow tier's
floor for b and, when measured, DuckDB's time as lines. Usage: plot_qdp.py RESULTS.json OUT.png"""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
    import numpy as np  # noqa: E402
except ImportError as missing:
    sys.exit(f"plot_qdp.py needs matplotlib and numpy ({missing}): run 'make setup' in tierflow's "
             f"source tree, or install them for {sys.executable} (TIERFLOW_PYTHON chooses the "
             "interpreter)")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_qdp.py RESULTS.json OUT.png")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    configs = doc["configs"]
    names = [c["name"] for c in configs]
    series = [("query", "time_ms_median"), ("SCAN_a", "scan_a_ms"), ("SCAN_b", "scan_b_ms"),
              ("AGGREGATE", "aggregate_ms")]
    xs = np.arange(len(names))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(10, 5))
    for i, (label, key) in enumerate(series):
        values = [c[key] for c in configs]
        bars = ax.bar(xs + (i - (len(series) - 1) / 2) * width, values, width, label=label)
        if key == "time_ms_median":
            ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.axhline(doc["storage_floor_ms"], color="black", linestyle="--",
               label=f"floor: b from {doc['slow_tier']} at {doc['storage_gbps']:.2f} GB/s")
    if "duckdb_ms_median" in doc:
        ax.axhline(doc["duckdb_ms_median"], color="tab:red", linestyle=":",
                   label=f"DuckDB {doc.get('duckdb_version', '')} ({doc['duckdb_threads']} threads)")
    ax.set_xticks(xs, [f"{n}\n{c['hit_rate'] * 100:.0f}% hits" if c["name"].startswith("prefetch")
                       else n for n, c in zip(names, configs)])
    ax.set_ylabel("milliseconds (median)")
    ax.set_title(f"tierflow qdp: SUM(b) WHERE a < x, {doc['rows']} rows, chunks of "
                 f"{doc['chunk_rows']}; slow {doc['slow_tier']}, fast {doc['fast_tier']}"
                 + (" (fills on the DSA MODEL)" if doc.get("fills_on_model") else ""),
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
