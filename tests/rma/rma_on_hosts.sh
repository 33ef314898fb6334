#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs an MPI program across the two hosts of the test bed in TIERFLOW_HOSTS (scripts/hosts.sh),
# launched from host0 as from a cluster's first node.
#
#   rma_on_hosts.sh openmpi|mpich LAUNCHER RANKS_PER_HOST PROGRAM [ARG]...
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
  # Debian's Open MPI turns osc/ucx off (/etc/openmpi/openmpi-mca-params.conf), and no other
  # one-sided component of it reaches another node over TCP.
  openmpi) exec "$hosts" run host0 "$launcher" --allow-run-as-root "${args[@]}" --mca osc ucx \
             ${forward[@]+"${forward[@]}"} -n $((2 * per)) "$@" ;;
  mpich) exec "$hosts" run host0 "$launcher" "${args[@]}" ${forward[@]+"${forward[@]}"} \
           -n $((2 * per)) "$@" ;;
esac
