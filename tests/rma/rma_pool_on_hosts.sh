#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs an MPI program across the two hosts of the test bed in TIERFLOW_HOSTS with a pool of its
# own (TIERFLOW_RMA_POOL, rma/mpi/pooled.h): a new file in a new directory under DIR, which the
# test bed shows to every host; removed afterwards with the directory made here.
#
#   rma_pool_on_hosts.sh DIR openmpi|mpich LAUNCHER RANKS_PER_HOST PROGRAM [ARG]...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
under=$1
shift
dir=$(mktemp -d "$under/tierflow-pool.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
export TIERFLOW_RMA_POOL=$dir/pool TIERFLOW_RMA_POOL_SIZE=${TIERFLOW_RMA_POOL_SIZE:-256MiB}
"$here/rma_on_hosts.sh" "$@"
