#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a job across the test bed's hosts (TIERFLOW_HOSTS) does with a pool it cannot use
# (rma/mpi/pooled.h): refused before any window is made, each with its reason, for a pool that is
# not shared, of another mode or user, too small, set on some ranks only, or badly named; a
# window where one rank cannot open the pool runs without it (the verbose line says why).
#
#   rma_pool_faults.sh openmpi|mpich LAUNCHER PROGRAM DIR    (DIR: shown to every host)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/../../scripts/hosts.sh"
mpi=$1 launcher=$2 program=$3 under=$4
failures=0
dir=$(mktemp -d "$under/tierflow-pool-faults.XXXXXX") || exit 1
private=/tmp/tierflow-pool-faults-$$  # on each host's own /tmp
cleanup() {
  rm -rf "$dir"
  for h in host0 host1; do "$hosts" run "$h" rm -rf "$private"; done
}
trap cleanup EXIT

# expect DESCRIPTION PATTERN ENV... -- ARGS...: the job fails and says PATTERN.
expect() {
  local what=$1 pattern=$2 out
  shift 2
  local env=()
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  out=$(env "${env[@]}" timeout 60 "$here/rma_on_hosts.sh" "$mpi" "$launcher" 1 "$@" 2>&1)
  local status=$?
  if [ $status -ne 0 ] && [ $status -ne 124 ] && grep -qE "$pattern" <<<"$out" &&
     ! grep -q "window made" <<<"$out"; then
    echo "ok: $what"
  else
    echo "FAIL: $what (status $status):"
    tail -5 <<<"$out"
    failures=$((failures + 1))
  fi
}

pool=$dir/pool
run() {
  TIERFLOW_TEST_DONE="window made and freed" timeout 60 "$here/rma_on_hosts.sh" "$mpi" \
    "$launcher" 1 "$program" 1 "$@" 2>&1
}

# A pool that works, made by a first job; then spoilt in each way.
out=$(TIERFLOW_RMA_POOL=$pool TIERFLOW_RMA_POOL_SIZE=8MiB run window 4096)
grep -q "window made" <<<"$out" || { echo "FAIL: a job with a good pool: $out"; failures=$((failures + 1)); }
[ "$(stat -c %a "$pool")" = 600 ] || { echo "FAIL: the pool's mode is $(stat -c %a "$pool")"; failures=$((failures + 1)); }

expect "too small for the window" "window refused: the pool .* has no free range" \
  TIERFLOW_RMA_POOL=$pool -- "$program" 1 window $((3 << 20))
expect "smaller than the window" "window refused: .* cannot fit in the pool" \
  TIERFLOW_RMA_POOL=$pool -- "$program" 1 window $((7 << 20))
chmod 644 "$pool"
expect "readable by others" "window refused: .*chmod 600" TIERFLOW_RMA_POOL=$pool -- "$program" 1 window 4096
chmod 600 "$pool"
chown 65534 "$pool"
expect "another user's" "window refused: .*belongs to uid 65534" \
  TIERFLOW_RMA_POOL=$pool -- "$program" 1 window 4096
chown "$(id -u)" "$pool"
expect "not shared (a file of each host's own /tmp)" "window refused: .*not the memory rank 0 maps" \
  TIERFLOW_RMA_POOL=$private/pool -- sh -c "mkdir -p $private && exec $program 1 window 4096"
expect "set on some ranks only" "window refused: TIERFLOW_RMA_POOL is set on some ranks" \
  TIERFLOW_RMA_POOL=$pool -- \
  sh -c "[ \"\$(hostname)\" = host1 ] && unset TIERFLOW_RMA_POOL; exec $program 1 window 4096"
expect "a relative path" "window refused: .*not an absolute path" \
  TIERFLOW_RMA_POOL=pool -- "$program" 1 window 4096
expect "a lease that is not one" "window refused: TIERFLOW_RMA_POOL_LEASE_MS=5s" \
  TIERFLOW_RMA_POOL=$pool TIERFLOW_RMA_POOL_LEASE_MS=5s -- "$program" 1 window 4096
expect "a pool size that is not one" "window refused: TIERFLOW_RMA_POOL_SIZE=1M " \
  TIERFLOW_RMA_POOL=$dir/new TIERFLOW_RMA_POOL_SIZE=1M -- "$program" 1 window 4096
[ ! -e "$dir/new" ] || { echo "FAIL: a refused size made a pool"; failures=$((failures + 1)); }

# One host cannot open the pool (its directory is on host0's /tmp only): no pool, no error.
"$hosts" run host1 rm -rf "$private"
"$hosts" run host0 mkdir -p "$private"
out=$(TIERFLOW_RMA_POOL=$private/pool TIERFLOW_RMA_VERBOSE=1 run window 4096)
if grep -q "window made" <<<"$out" && grep -q "left out of the pool: cannot open" <<<"$out"; then
  echo "ok: a rank that cannot open the pool: the window is made without it"
else
  echo "FAIL: a rank that cannot open the pool:"
  tail -5 <<<"$out"
  failures=$((failures + 1))
fi
echo "$failures failures"
[ "$failures" -eq 0 ] && echo PASS
