#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs an MPI program across the two hosts of the test bed in TIERFLOW_HOSTS (scripts/hosts.sh),
# launched from host0 as from a cluster's first node.
#
#   rma_on_hosts.sh openmpi|mpich LAUNCHER RANKS_PER_HOST PROGRAM [ARG]...
#
# With TIERFLOW_TEST_DONE=REGEX (and TIERFLOW_TEST_DONE_COUNT=N, default 1), a job still running
# 5 s after its output matched REGEX N times is ended, and the run counts as the program's:
# Debian's MPICH over TCP may hang in MPI_Finalize after the program's last word (docs/hosts.md).
set -euo pipefail
hosts="$(cd "$(dirname "$0")/../../scripts" && pwd)/hosts.sh"
mpi=$1 launcher=$2 per=$3
shift 3
read -r -a args <<<"$("$hosts" mpirun-args "$mpi" "$per")"
# The library's settings (and a library preloaded) reach every rank, as the program's user
# would pass them.
forward=()
for v in $(compgen -e | grep -E '^(TIERFLOW_RMA_|LD_PRELOAD$)' || true); do
  [ "$mpi" = openmpi ] && forward+=(-x "$v") || forward+=(-genv "$v" "${!v}")
done
case $mpi in
  # Debian's Open MPI turns osc/ucx and osc/pt2pt off (/etc/openmpi/openmpi-mca-params.conf),
  # the two that reach another node over TCP (docs/hosts.md): TIERFLOW_TEST_OSC names one.
  openmpi) job=("$hosts" run host0 "$launcher" --allow-run-as-root "${args[@]}"
                --mca osc "${TIERFLOW_TEST_OSC:-ucx}"
                ${forward[@]+"${forward[@]}"} -n $((2 * per)) "$@") ;;
  mpich) job=("$hosts" run host0 "$launcher" "${args[@]}" ${forward[@]+"${forward[@]}"}
              -n $((2 * per)) "$@") ;;
esac
[ -n "${TIERFLOW_TEST_DONE:-}" ] || exec "${job[@]}"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
"${job[@]}" >"$log" 2>&1 &
pid=$!
done_at=""
while kill -0 "$pid" 2>/dev/null; do
  if [ -z "$done_at" ] &&
     [ "$(grep -cE "$TIERFLOW_TEST_DONE" "$log")" -ge "${TIERFLOW_TEST_DONE_COUNT:-1}" ]; then
    done_at=$SECONDS
  fi
  if [ -n "$done_at" ] && [ $((SECONDS - done_at)) -ge 5 ]; then
    kill "$pid"  # the test bed's client: the job on host0 ends with it
    wait "$pid" || true
    cat "$log"
    echo "rma_on_hosts.sh: the job was still running 5 s after its last result: the MPI hung" \
      "in MPI_Finalize (docs/hosts.md); ended it"
    exit 0
  fi
  sleep 0.5
done
status=0
wait "$pid" || status=$?
cat "$log"
exit "$status"
