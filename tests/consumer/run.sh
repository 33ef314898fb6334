#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the build in $1 into a scratch prefix, then configures, builds and runs the consumer
# project against it (CMake package) and compiles it once more through pkg-config.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$here" -B "$scratch/build" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/build" >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/build/consumer"
"$scratch/build/consumer_static"
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/build/outside_engine"
# The examples build on their own against the installed package, as their CMakeLists says.
cmake -S "$here/../../examples" -B "$scratch/examples" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/examples" >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/examples/tiered_copy" 1048576 >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/examples/pipe_flavours" "$scratch" >/dev/null
test -z "$(ls -A "$scratch" | grep pipe-flavours)"  # its work directory is gone
echo "consumer: the examples built on their own against the installed tierflow"
PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" c++ -std=c++20 "$here/main.cc" -o "$scratch/pc" \
  $(PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" pkg-config --cflags --libs tierflow)
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/pc"
# A C program against the installed C API (tierflow/tierflow_c.h), compiled as C.
PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" cc -std=c11 -Wall -Wextra -Werror \
  "$here/../capi/capi_test.c" -o "$scratch/c_consumer" \
  $(PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" pkg-config --cflags --libs tierflow)
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/c_consumer" >/dev/null
echo "consumer: a C program built with cc against the installed C API"
# One version everywhere: the header, pkg-config, the SONAME and the CLI.
version=$(sed -n 's/^#define TIERFLOW_VERSION_STRING "\(.*\)"$/\1/p' \
  "$scratch/prefix/include/tierflow/version.h")
test "$(PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" pkg-config --modversion tierflow)" = "$version"
test -e "$scratch/prefix/lib/libtierflow.so.${version%%.*}"
test "$(readelf -d "$scratch/prefix/lib/libtierflow.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')" = \
  "libtierflow.so.${version%%.*}"
if [ -x "$scratch/prefix/bin/tierflow" ]; then
  test "$("$scratch/prefix/bin/tierflow" --version)" = "tierflow $version"
fi
echo "consumer: version $version in the header, pkg-config, the SONAME and the CLI"
# The completion script and the manual page are installed, list the commands, and work.
if [ -x "$scratch/prefix/bin/tierflow" ]; then
  completion="$scratch/prefix/share/bash-completion/completions/tierflow"
  manpage="$scratch/prefix/share/man/man1/tierflow.1"
  test "$(bash -c "source '$completion'; COMP_WORDS=(tierflow bench co); COMP_CWORD=2; _tierflow;
    echo \${COMPREPLY[*]}")" = "copy coherence"
  grep -q '^\.SS "tierflow sort"' "$manpage"
  if command -v man >/dev/null; then
    MANWIDTH=80 man -l "$manpage" 2>/dev/null | grep -q "tierflow bench copy"
  fi
  echo "consumer: the installed completion completes and the installed manual page renders"
fi
# The installed CLI finds its Python helpers in <prefix>/share/tierflow, not in the source tree.
if [ -x "$scratch/prefix/bin/tierflow" ]; then
  TIERFLOW_PYTHON="$here/../../.venv/bin/python3" "$scratch/prefix/bin/tierflow" bench copy \
    --sizes 4KiB --reps 1 --warmup 0 --min-round-ms 1 --no-progress --plot "$scratch/copy.png" >/dev/null
  test "$(head -c 4 "$scratch/copy.png" | tail -c 3)" = "PNG"
  echo "consumer: the installed CLI plotted with its installed helper"
    # Without TIERFLOW_PYTHON, the installed CLI (outside the source tree) finds the venv of the
  # source tree it was built from.
  env -u TIERFLOW_PYTHON "$scratch/prefix/bin/tierflow" bench copy --sizes 4KiB --reps 1 \
    --warmup 0 --min-round-ms 1 --quiet --plot "$scratch/copy2.png" >/dev/null
  test "$(head -c 4 "$scratch/copy2.png" | tail -c 3)" = "PNG"
  echo "consumer: the installed CLI found the project's venv by itself"
  # bench rma finds the installed MPI programs (libexec/tierflow) and libraries (lib).
  if [ -n "$(ls "$scratch/prefix/lib" | grep '^libtierflow_rma_')" ]; then
    "$scratch/prefix/bin/tierflow" bench rma --reps 1 --iters 10 --sizes 1 --gats-ranks 2 \
      --json > "$scratch/rma.json"
    grep -q '"data_checked": true' "$scratch/rma.json"
    echo "consumer: the installed CLI ran bench rma with the installed libraries"
  fi
fi
echo "1 passed, 0 failed"
