#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what tierflow needs on Debian 12 (only what is missing) and makes the Python venv
# used for plots, the DuckDB referee and CLI tests. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential clang clang-format cmake ninja-build pkg-config libhwloc-dev hwloc libnuma-dev
          libgtest-dev libcli11-dev libfmt-dev nlohmann-json3-dev liburing-dev libsimde-dev
          python3-venv python3-dev libpmem-dev zlib1g-dev g++-aarch64-linux-gnu qemu-user-static
          libopenmpi-dev openmpi-bin libmpich-dev mpich libfftw3-dev iproute2 util-linux procps
          gfortran)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python3 ] ||
   ! .venv/bin/python3 -c "import matplotlib, numpy, duckdb, lizard, nanobind, scikit_build_core" 2>/dev/null; then
  echo "setup: creating .venv with matplotlib, numpy, duckdb, lizard, nanobind and scikit-build-core"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
fi

# The Python package (docs/python.md) in .venv, built once here with the .venv's nanobind;
# `make test-python` rebuilds it from the sources and reinstalls it.
if ! .venv/bin/python3 -c "import tierflow" 2>/dev/null; then
  echo "setup: building the tierflow Python package into .venv (pip install .)"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/pip install -q --no-build-isolation \
    --disable-pip-version-check .
fi
