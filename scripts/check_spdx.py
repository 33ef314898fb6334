#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every source file of the project names its license in an SPDX line near its top.

Usage: check_spdx.py SOURCE_DIR [--add]: lists the tracked source files (C++, Python, shell,
C, Fortran, CMake, Makefile, linker maps) without the line and exits 1; with --add, writes it into them.
"""
import pathlib
import re
import subprocess
import sys

LINE = "SPDX-License-Identifier: Apache-2.0"
SOURCE = re.compile(r"(\.(cc|c|h|f90|py|sh|cmake|in|map)|CMakeLists\.txt|Makefile|\.ci/run)$")
HASH_COMMENT = re.compile(r"(\.(py|sh|cmake|in)|CMakeLists\.txt|Makefile|\.ci/run)$")


def sources(root):
    names = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    return [pathlib.Path(root, n) for n in names if SOURCE.search(n)]


def comment(path):
    name = str(path)
    if name.endswith((".map", ".c")):
        return f"/* {LINE} */"
    if name.endswith(".f90"):
        return f"! {LINE}"
    if name.endswith(".pc.in"):
        return f"# {LINE}"
    return f"# {LINE}" if HASH_COMMENT.search(name) else f"// {LINE}"


def add(path):
    lines = path.read_text().splitlines(keepends=True)
    at = 1 if lines and lines[0].startswith("#!") else 0
    lines.insert(at, comment(path) + "\n")
    path.write_text("".join(lines))


def main(root, write):
    files = sources(root)
    missing = [p for p in files if LINE not in "".join(p.read_text().splitlines(True)[:3])]
    for p in missing:
        if write:
            add(p)
        else:
            print(f"no SPDX line in the first three lines: {p}")
    print(f"check_spdx: {len(files)} source files, {len(missing)} without the line"
          + (" (added)" if write else ""))
    return 0 if write or not missing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--add" in sys.argv[2:]))
