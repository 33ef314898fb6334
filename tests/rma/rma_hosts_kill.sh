#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A host of the test bed killed while the job's ranks are in epochs with every rank: the ranks
# on the surviving host end with an error (no hang), and nothing is left in its /dev/shm.
# Two ranks per host: the node windows have ranks to reach through shared memory.
#
#   rma_hosts_kill.sh openmpi|mpich LAUNCHER PROGRAM SHARE...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/../../scripts/hosts.sh"
mpi=$1 launcher=$2 program=$3
shift 3
shares=()
for d in "$@"; do shares+=(--share "$d"); done
eval "$("$hosts" up 2 "${shares[@]}")" || exit 1
trap '"$hosts" down' EXIT
out=$(mktemp)
timeout 60 "$here/rma_on_hosts.sh" "$mpi" "$launcher" 2 "$program" 2 until-killed >"$out" 2>&1 &
job=$!
for _ in $(seq 300); do grep -q "epochs running" "$out" && break; sleep 0.1; done
grep -q "epochs running" "$out" || { cat "$out"; echo "FAIL: the job did not start"; exit 1; }
sleep 1
"$hosts" kill host1
wait "$job"
status=$?
left=$("$hosts" run host0 sh -c 'ls -A /dev/shm')
rm -f "$out"
echo "job ended with status $status; host0's /dev/shm: '${left}'"
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { echo "FAIL: the job did not end with an error"; exit 1; }
[ -z "$left" ] || { echo "FAIL: left in /dev/shm: $left"; exit 1; }
echo "PASS"
