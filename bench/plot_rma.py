# SPDX-License-Identifier: Apache-2.0
"""Plots `tierflow bench rma` rows: with/without ratio per size, one panel per MPI and window
kind, one line per synchronisation and operation (put solid, get dashed). Usage: plot_rma.py ROWS.json OUT.png"""
import json
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_rma.py needs matplotlib (make setup installs it in .venv)")


def main():
    with open(sys.argv[1]) as f:
        rows = [r for r in json.load(f) if r["op"] in ("put", "get")]
    panels = sorted({(r["mpi"], r["window"]) for r in rows})
    if not panels:
        sys.exit("plot_rma.py: no put or get rows to plot")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, (mpi, window) in zip(axes[0], panels):
        for op, style in (("put", "-"), ("get", "--")):
            for sync in ("pscw", "fence", "lock", "flush"):
                pts = sorted((r["bytes"], r["ratio"]) for r in rows
                             if r["mpi"] == mpi and r["window"] == window and r["sync"] == sync
                             and r["op"] == op)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o",
                            label=f"{op} {sync}")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{mpi}, {window} windows")
        ax.set_xlabel("bytes")
        ax.set_ylabel("latency with / without library")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
