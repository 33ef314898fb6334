#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A host of the test bed killed while the job's ranks are in epochs with every rank: the ranks
# on the surviving host end with an error (no hang), and nothing is left in its /dev/shm.
# Two ranks per host: the node windows have ranks to reach through shared memory.
# With --pool DIR (under a SHARE), the windows are in a pool made there (rma/mpi/pooled.h):
# another job uses the same pool meanwhile and passes, and once the dead ranks' leases have
# run out, everything the killed job held in the pool is free again.
#
#   rma_hosts_kill.sh [--pool DIR] openmpi|mpich LAUNCHER PROGRAM SHARE...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/../../scripts/hosts.sh"
pool_dir=""
if [ "$1" = --pool ]; then
  pool_dir=$(mktemp -d "$2/tierflow-pool-kill.XXXXXX") || exit 1
  shift 2
fi
mpi=$1 launcher=$2 program=$3
shift 3
usage_of() { "$(dirname "$program")/pool_usage" "$TIERFLOW_RMA_POOL" "$TIERFLOW_RMA_POOL_LEASE_MS"; }
if [ -n "$pool_dir" ]; then
  export TIERFLOW_RMA_POOL=$pool_dir/pool TIERFLOW_RMA_POOL_SIZE=64MiB TIERFLOW_RMA_POOL_LEASE_MS=1000
fi
shares=()
for d in "$@"; do shares+=(--share "$d"); done
eval "$("$hosts" up 2 "${shares[@]}")" || exit 1
trap '"$hosts" down; [ -z "$pool_dir" ] || rm -rf "$pool_dir"' EXIT
out=$(mktemp)
timeout 60 "$here/rma_on_hosts.sh" "$mpi" "$launcher" 2 "$program" 2 until-killed >"$out" 2>&1 &
job=$!
for _ in $(seq 300); do grep -q "epochs running" "$out" && break; sleep 0.1; done
grep -q "epochs running" "$out" || { cat "$out"; echo "FAIL: the job did not start"; exit 1; }
sleep 1
if [ -n "$pool_dir" ]; then
  other=$(TIERFLOW_TEST_DONE="PASS: 0 failures" timeout 60 "$here/rma_on_hosts.sh" "$mpi" \
    "$launcher" 1 "$program" 1 2>&1)
  grep -q "PASS: 0 failures" <<<"$other" || { echo "$other"; echo "FAIL: a second job on the pool"; exit 1; }
  echo "a second job on the same pool meanwhile: PASS; pool: $(usage_of)"
fi
"$hosts" kill host1
wait "$job"
status=$?
left=$("$hosts" run host0 sh -c 'ls -A /dev/shm')
rm -f "$out"
echo "job ended with status $status; host0's /dev/shm: '${left}'"
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { echo "FAIL: the job did not end with an error"; exit 1; }
[ -z "$left" ] || { echo "FAIL: left in /dev/shm: $left"; exit 1; }
if [ -n "$pool_dir" ]; then
  sleep 2.5  # the dead ranks' leases (1 s) run out
  usage=$(usage_of)
  echo "pool after the killed job: $usage"
  read -r _ free _ total <<<"$usage"
  [ "$free" = "$total" ] || { echo "FAIL: the killed job's pool space was not reclaimed"; exit 1; }
fi
echo "PASS"
