# SPDX-License-Identifier: Apache-2.0
"""Plots `tierflow bench dsort --json`: per MPI and key distribution, the sort's time split
into its exchange pass, its merge pass and the rest (sampling, checks), beside its floor split
into the I/O floor and the exchange floor measured in the same runs.
Usage: plot_dsort.py RESULTS.json OUT.png"""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError as missing:
    sys.exit(f"plot_dsort.py needs matplotlib ({missing}): run 'make setup' in tierflow's "
             f"source tree, or install it for {sys.executable} (TIERFLOW_PYTHON chooses the "
             "interpreter)")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_dsort.py RESULTS.json OUT.png")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    rows = doc["rows"]
    if not rows:
        sys.exit("plot_dsort.py: no rows to plot")
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4))
    for i, r in enumerate(rows):
        rest = max(0.0, r["sort_ms"] - r["exchange_ms"] - r["merge_ms"])
        bottom = 0.0
        for part, ms, color in (("exchange pass", r["exchange_ms"], "tab:blue"),
                                ("merge pass", r["merge_ms"], "tab:orange"),
                                ("sampling, checks", rest, "tab:gray")):
            ax.bar(i - 0.2, ms / 1e3, 0.38, bottom=bottom, color=color,
                   label=part if i == 0 else None)
            bottom += ms / 1e3
        ax.bar(i + 0.2, r["io_floor_ms"] / 1e3, 0.38, color="tab:green",
               label="I/O floor" if i == 0 else None)
        ax.bar(i + 0.2, r["exchange_floor_ms"] / 1e3, 0.38, bottom=r["io_floor_ms"] / 1e3,
               color="tab:olive", label="exchange floor" if i == 0 else None)
        ax.text(i - 0.2, bottom, f"{r['vs_floor']:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)), [f"{r['mpi']}\n{r['keys']}" for r in rows])
    ax.set_ylabel("seconds")
    first = rows[0]
    ax.set_title(f"tierflow-dsort: {first['bytes'] / 2**30:.2f} GiB of {first['format']} records "
                 f"on {first['ranks']} ranks ({first['hosts']} hosts), --memory "
                 f"{first['memory_bytes'] / 2**20:.0f} MiB per rank", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
