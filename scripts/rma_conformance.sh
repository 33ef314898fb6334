#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# MPICH's RMA test suite (test/mpi/rma of Debian's mpich source package) under each MPI with
# libtierflow_rma preloaded; see docs/rma.md. Needs the libraries built (make build) and
# Debian's source packages (a deb-src entry is added when there is none: root only).
#
# usage: scripts/rma_conformance.sh [BUILD_DIR] [openmpi|mpich ...]
# Writes BUILD_DIR/rma-conformance/<mpi>.json; exits 1 if a test passes with the MPI alone
# and fails with the library. With RMA_CONFORMANCE_HOSTS=N, every test is a job across N hosts
# of a test bed brought up here (scripts/hosts.sh; root), and the files are <mpi>-hosts.json;
# TIERFLOW_RMA_POOL and the library's other settings reach every rank. With
# RMA_CONFORMANCE_POOL=1 too, the hosts share a pool (a new directory on /dev/shm, removed at the
# end) that every rank's TIERFLOW_RMA_POOL names, and the files are <mpi>-hosts-pool.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
shift || true
if [ $# -gt 0 ]; then mpis=("$@"); else mpis=(openmpi mpich); fi
work="$build/rma-conformance"
mkdir -p "$work"

fetch_source() {
  [ -d "$work/src/test/mpi/rma" ] && return
  cd "$work"
  if ! apt-get source --download-only mpich >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "rma_conformance: apt has no deb-src entry and only root may add one;" \
        "add deb-src lines for Debian to /etc/apt/sources.list.d and run again" >&2
      exit 2
    fi
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      >/etc/apt/sources.list.d/tierflow-deb-src.sources
    apt-get update -qq
    apt-get source --download-only mpich >/dev/null
  fi
  rm -rf src && mkdir src
  tar -xf mpich_*.orig.tar.* -C src --strip-components=1 --wildcards '*/test/mpi'
}

# The suite configured against one MPI's compiler wrapper; only what test/mpi/rma needs.
build_suite() {
  local mpi=$1 dir="$work/$1"
  [ -f "$dir/.built" ] && return
  rm -rf "$dir" && cp -a "$work/src/test/mpi" "$dir"
  cd "$dir"
  local cc=mpicc.$mpi run=mpirun.openmpi
  [ "$mpi" = mpich ] && run=mpiexec.mpich
  # Open MPI 4.1 declares the MPI-1 functions that dtpools still calls only when asked.
  ./configure CC=$cc MPICC=$cc MPIEXEC=$run CPPFLAGS=-DOMPI_OMIT_MPI1_COMPAT_DECLS=0 \
    --enable-fortran=no --disable-cxx \
    --disable-spawn --disable-romio --enable-strictmpi >configure.log 2>&1 ||
    { echo "rma_conformance: configure failed, see $dir/configure.log" >&2; exit 2; }
  make -j"$(nproc)" -C util >make.log 2>&1
  make -j"$(nproc)" -C dtpools >>make.log 2>&1
  # -k: a test the MPI cannot compile (an MPICH extension) is reported as not built.
  make -k -j"$(nproc)" -C rma >>make.log 2>&1 || true
  touch .built
}

fetch_source
suffix=""
pool_args=()
if [ "${RMA_CONFORMANCE_POOL:-0}" = 1 ]; then
  if [ "${RMA_CONFORMANCE_HOSTS:-0}" -lt 2 ]; then
    echo "rma_conformance: RMA_CONFORMANCE_POOL=1 is a pool across hosts: set" \
      "RMA_CONFORMANCE_HOSTS=2 (or more) too" >&2
    exit 2
  fi
  pool_dir=$(mktemp -d /dev/shm/tierflow-conformance-pool.XXXXXX)
  pool_args=(--pool "$pool_dir")
  export TIERFLOW_RMA_POOL=$pool_dir/pool TIERFLOW_RMA_POOL_SIZE=${TIERFLOW_RMA_POOL_SIZE:-256MiB}
fi
if [ "${RMA_CONFORMANCE_HOSTS:-0}" -ge 2 ]; then
  eval "$(bash "$here/hosts.sh" up "$RMA_CONFORMANCE_HOSTS" --share "$build" "${pool_args[@]}")"
  # The pool directory is this run's (mktemp): removed with everything in it.
  trap 'bash "$here/hosts.sh" down; [ -z "${pool_dir:-}" ] || rm -rf "$pool_dir"' EXIT
  suffix=-hosts${pool_dir:+-pool}
fi
status=0
for mpi in "${mpis[@]}"; do
  lib="$build/libtierflow_rma_$mpi.so"
  [ -f "$lib" ] || { echo "rma_conformance: $lib is missing: build first (make build)" >&2; exit 2; }
  build_suite "$mpi"
  echo "== MPICH test/mpi/rma under $mpi, libtierflow_rma preloaded"
  python3 "$here/rma_conformance.py" "$work/$mpi/rma" "$mpi" "$lib" "$work/$mpi$suffix.json" ||
    status=1
done
exit $status
