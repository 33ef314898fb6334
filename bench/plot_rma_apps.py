# SPDX-License-Identifier: Apache-2.0
"""Plots `tierflow bench rma --apps` runs as the thesis' Fig. 4.18 and Table 4.3 do: per
application and MPI, the time of the 2-rank runs split into computation, communication and
synchronisation, one stacked bar per variant without and with the library.
Usage: plot_rma_apps.py APPS.json OUT.png"""
import json
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_rma_apps.py needs matplotlib (make setup installs it in .venv)")


def label(r):
    lib = r["coherence"] if r["with_library"] else "MPI alone"
    if r.get("offload", "off") != "off":
        lib += "\n+" + r["offload"]
    return f'{r["variant"]}\n{lib}'


def main():
    with open(sys.argv[1]) as f:
        runs = [r for r in json.load(f) if r["ranks"] == 2]
    panels = sorted({(r["app"], r["mpi"]) for r in runs})
    if not panels:
        sys.exit("plot_rma_apps.py: no 2-rank runs to plot")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 4.0), squeeze=False)
    for ax, (app, mpi) in zip(axes[0], panels):
        rows = [r for r in runs if r["app"] == app and r["mpi"] == mpi]
        rows.sort(key=lambda r: (r["variant"], r["with_library"], r["coherence"], r.get("offload", "")))
        x = range(len(rows))
        bottom = [0.0] * len(rows)
        for key, colour in (("compute_s", "#8da0cb"), ("comm_s", "#fc8d62"), ("sync_s", "#66c2a5")):
            values = [r[key] for r in rows]
            ax.bar(x, values, bottom=bottom, color=colour, label=key[:-2])
            bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_xticks(list(x))
        ax.set_xticklabels([label(r) for r in rows], fontsize=7)
        title = "NAS FT class " + rows[0].get("class", "") if app == "ft" else "cellular automaton"
        ax.set_title(f"{title}, {mpi}, 2 ranks")
        ax.set_ylabel("seconds per rank (mean)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
