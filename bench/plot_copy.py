# SPDX-License-Identifier: Apache-2.0
"""Plots `tierflow bench copy --json` results: GB/s against copy size, one line per
configuration, glibc memcpy dashed. Usage: plot_copy.py RESULTS.json OUT.png"""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError as missing:
    sys.exit(f"plot_copy.py needs matplotlib ({missing}): run 'make setup' in tierflow's "
             f"source tree, or install them for {sys.executable} (TIERFLOW_PYTHON chooses the "
             "interpreter)")


def label(row):
    if row["engine"] == "memcpy":
        return f"memcpy x{row['threads']} (src {row['src_node']} -> dst {row['dst_node']})"
    batch = f" batch {row['batch']}" if row["mode"] == "batch" else ""
    return (f"{row['engine']} {row['threads']}w {row['policy']}{batch} subm {row['submitters']}"
            f" ({row['src_node']}->{row['dst_node']})")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_copy.py RESULTS.json OUT.png")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    lines = {}
    for row in doc["configs"] + doc["baseline"]:
        lines.setdefault(label(row), []).append(row)
    fig, ax = plt.subplots(figsize=(9, 5))
    for name, rows in sorted(lines.items()):
        rows.sort(key=lambda r: r["size_bytes"])
        xs = [r["size_bytes"] for r in rows]
        ys = [r["gbps_median"] for r in rows]
        lo = [r["gbps_median"] - r["gbps_min"] for r in rows]
        hi = [r["gbps_max"] - r["gbps_median"] for r in rows]
        style = "--" if rows[0]["engine"] == "memcpy" else "-"
        ax.errorbar(xs, ys, yerr=[lo, hi], linestyle=style, marker="o", capsize=3, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("copy size (bytes)")
    ax.set_ylabel("GB/s (bytes copied / s / 1e9)")
    ax.set_title(f"tierflow bench copy (cpu isa {doc.get('cpu_isa', '?')}; median, min-max bars)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
