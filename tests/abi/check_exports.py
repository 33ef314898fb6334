# SPDX-License-Identifier: Apache-2.0
"""The exported symbols of libtierflow.so (issue 13: a sealed ABI). Every dynamic symbol must
belong to tierflow's public API: a name in namespace tierflow outside its internal namespaces
(detail, cache, cpu, dsa, ...) and outside the private implementation classes (Impl), or the
type information or virtual table of such a class. The API users link must be there.

Usage: check_exports.py PATH/TO/libtierflow.so
"""
import re
import subprocess
import sys

INTERNAL = re.compile(r"^tierflow::(detail|cache|cpu|dsa|internal|bench|tools|testing|testkit)::|::Impl(::|$)")
REQUIRED = [
    "tierflow::Topology::Discover",
    "tierflow::CpuEngine::Create",
    "tierflow::Engine::Submit",
    "tierflow::Handle::Wait",
    "tierflow::OffloadCache::Create",
    "tierflow::OffloadCache::Access",
    "tierflow::CacheEntry::MarkDirty",
    "tierflow::Buffer::OnNode",
    "tierflow::PlanCopy",
    "tierflow::AbortOnResultError",
    "tierflow::Version",
    "tierflow::DsaCpuFeatures::Detect",  # a default argument of DsaInventory::Discover
    "typeinfo for tierflow::Engine",
    "vtable for tierflow::Engine",
    "tierflow::Crc32cShift",  # engine authors combine CRC parts (engine_module.h)
]
# For tests only, or internals reached by tests through private headers: never exported.
FORBIDDEN = re.compile(r"FaultInjectingEngine|held_piece_scale|HeldPieceScale|PipeRuntime::impl")


def scope(symbol):
    """The entity a symbol names: without the "typeinfo for" kind of prefix, template
    arguments and parameters."""
    for prefix in ("typeinfo name for ", "typeinfo for ", "vtable for "):
        if symbol.startswith(prefix):
            symbol = symbol[len(prefix):]
    return re.split(r"[(<]", symbol, maxsplit=1)[0]


def main(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", library], capture_output=True,
                         text=True, check=True).stdout
    # "@@TIERFLOW_0": the version node of cmake/tierflow.map; the node itself is no symbol.
    symbols = [line.split(" ", 2)[2].split("@@")[0] for line in out.splitlines()
               if line.count(" ") >= 2 and not line.endswith(" A TIERFLOW_0")]
    bad = [s for s in symbols
           if not scope(s).startswith("tierflow::") or INTERNAL.search(scope(s))
           or FORBIDDEN.search(s)]
    missing = [r for r in REQUIRED if not any(s.startswith(r) for s in symbols)]
    for s in bad:
        print(f"exported but not public API: {s}")
    for r in missing:
        print(f"public API not exported: {r}")
    print(f"{len(symbols)} symbols exported, {len(bad)} not public, {len(missing)} missing")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
