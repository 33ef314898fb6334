# SPDX-License-Identifier: Apache-2.0
"""Plots `tierflow bench coherence --json` results: completed p50 against size for each
instruction and pmem_persist, one panel per layout (lines dirty before), with Chen's QEMU TCG
medians (where the instructions are no-ops) for comparison. Usage: plot_coherence.py RESULTS.json OUT.png"""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError as missing:
    sys.exit(f"plot_coherence.py needs matplotlib ({missing}): run 'make setup' in tierflow's "
             f"source tree, or install them for {sys.executable} (TIERFLOW_PYTHON chooses the "
             "interpreter)")

LAYOUTS = ["contiguous", "scattered-1-fence", "scattered-fence-per-page"]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_coherence.py RESULTS.json OUT.png")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    rows = [r for r in doc["rows"] + doc["referee"] if r["state"] == "dirty" and r["run"] == 0]
    fig, axes = plt.subplots(1, len(LAYOUTS), figsize=(15, 5), sharey=True)
    for ax, layout in zip(axes, LAYOUTS):
        ops = sorted({r["op"] for r in rows})
        for op in ops:
            pts = sorted((r["size_bytes"], r["p50_us"], r["p25_us"], r["p75_us"])
                         for r in rows if r["op"] == op and r["layout"] == layout)
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
            style = "--" if op == "pmem_persist" else "-"
            ax.errorbar(xs, ys, yerr=err, linestyle=style, marker="o", capsize=2, label=op)
        if layout == "contiguous":
            chen = doc["chen_qemu_tcg_noop"]
            ax.plot([4096 * 2 ** c["order"] for c in chen], [c["p50_us"] for c in chen], ":",
                    marker="x", color="gray", label="Chen p50 (QEMU TCG, no-op)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes (4 KiB pages x 2^order)")
        ax.set_title(f"{layout}, lines dirty")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("completed p50, µs (p25-p75 bars)")
    fig.suptitle(f"tierflow bench coherence: {doc['architecture']}, {doc['line_size']}-byte lines, "
                 f"{doc['samples']} samples per point")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
