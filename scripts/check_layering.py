# SPDX-License-Identifier: Apache-2.0
"""Checks that dependencies point down (docs/architecture.md, "Layering"): every #include of a
component's file names its own headers, a lower component's private header ("<b>/x.h"), or a
public header ("tierflow/x.h") owned by itself or a lower component. The applications
(apps/<name>/, and the command line: bench/, tools/) may include every public header, their
own headers, and private headers only as docs/architecture.md allows.

Usage: check_layering.py [SOURCE_DIR]   (exit status 1 and one line per violation)
"""
import pathlib
import re
import sys

# Private headers the applications may include (docs/architecture.md explains why).
APP_PRIVATE = {"bench": {"common", "kernels", "dsa"}, "tools": {"common", "bench", "qdp", "sort"},
               "qdp": set(), "sort": set(), "mpiapp": set(), "ft": {"mpiapp"}, "ca": {"mpiapp"},
               "dsort": {"sort", "mpiapp"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def read_table(root):
    text = (root / "docs" / "architecture.md").read_text()
    block = re.search(r"<!-- layering.*?-->\s*```\n(.*?)```\s*<!-- /layering -->", text, re.S)
    if block is None:
        sys.exit("check_layering: no layering table in docs/architecture.md")
    allowed, owner = {}, {}
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        name, rest = line.split(":", 1)
        words = rest.split()
        allowed[name] = {w for w in words if not w.endswith(".h")}
        for header in (w for w in words if w.endswith(".h")):
            owner[header] = name
    return allowed, owner


def component_of(root, path):
    parts = path.relative_to(root).parts
    if parts[0] in ("src", "apps"):
        return parts[1]
    return parts[0]  # bench, tools


def violations(root):
    allowed, owner = read_table(root)
    found = []
    public = {p.name for p in (root / "include" / "tierflow").glob("*.h")}
    for header in sorted(public - owner.keys()):
        found.append(f"include/tierflow/{header}: not in the layering table (which component owns it?)")
    files = [p for d in ("src", "apps", "bench", "tools") for p in (root / d).rglob("*") if p.suffix in (".h", ".cc")]
    for path in sorted(files):
        me = component_of(root, path)
        if me not in allowed:
            found.append(f"{path.relative_to(root)}: component {me} is not in the layering table")
            continue
        for m in INCLUDE.finditer(path.read_text()):
            folder, name = m.group(1), m.group(2)
            where = f"{path.relative_to(root)}: #include \"{folder}/{name}\""
            if folder == "tierflow":
                them = owner.get(name)
                if them is None:
                    found.append(f"{where}: a public header the table does not list")
                elif them != me and them not in allowed[me]:
                    found.append(f"{where}: {them} is not below {me}")
            elif folder != me:
                if me in APP_PRIVATE:
                    if folder not in APP_PRIVATE[me]:
                        found.append(f"{where}: the application uses public headers (not {folder}'s private ones)")
                elif folder not in allowed[me]:
                    found.append(f"{where}: {folder} is not below {me}")
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = violations(root)
    for line in found:
        print(line)
    print(f"check_layering: {len(found)} violation(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
