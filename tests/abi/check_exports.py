# SPDX-License-Identifier: Apache-2.0
"""The exported symbols of libtierflow.so (issue 13: a sealed ABI). Every dynamic symbol must
belong to tierflow's public API: a name in namespace tierflow outside its internal namespaces
(detail, cache, cpu, dsa, ...) and outside the private implementation classes (Impl), or the
type information or virtual table of such a class, versioned TIERFLOW_0; or a function of the
C API (tierflow/tierflow_c.h: tf_*), versioned TIERFLOW_C_1 and declared in that header. The API
users link must be there.

Usage: check_exports.py PATH/TO/libtierflow.so
"""
import pathlib
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
C_HEADER = pathlib.Path(__file__).resolve().parents[2] / "include" / "tierflow" / "tierflow_c.h"
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
    # "name@@NODE": NODE is the version node of cmake/tierflow.map; the nodes are no symbols.
    versioned = [line.split(" ", 2)[2].split("@@") for line in out.splitlines()
                 if line.count(" ") >= 2 and not re.search(r" A TIERFLOW_(C_)?\d+$", line)]
    declared = set(re.findall(r"\b(tf_\w+)\(", C_HEADER.read_text()))
    c_api = [s for s, *node in versioned if s.startswith("tf_")]
    symbols = [s for s, *node in versioned if not s.startswith("tf_")]
    bad = [s for s in symbols
           if not scope(s).startswith("tierflow::") or INTERNAL.search(scope(s))
           or FORBIDDEN.search(s)]
    bad += [f"{s}@@{'@@'.join(node)} (C API: declared in tierflow_c.h, node TIERFLOW_C_1)"
            for s, *node in versioned if s.startswith("tf_")
            and (s not in declared or node != ["TIERFLOW_C_1"])]
    bad += [f"{s}@@{'@@'.join(node)} (C++ API: node TIERFLOW_0)"
            for s, *node in versioned if not s.startswith("tf_") and node != ["TIERFLOW_0"]]
    missing = [r for r in REQUIRED if not any(s.startswith(r) for s in symbols)]
    missing += sorted(declared - set(c_api))
    for s in bad:
        print(f"exported but not public API: {s}")
    for r in missing:
        print(f"public API not exported: {r}")
    print(f"{len(symbols)} C++ and {len(c_api)} C symbols exported, {len(bad)} not public, "
          f"{len(missing)} missing")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
