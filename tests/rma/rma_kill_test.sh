#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# rma_kill_test.sh LAUNCHER... -- PROGRAM: runs PROGRAM (2 ranks) under the launcher, where
# rank 1 kills itself inside an epoch. Passes when the run ends within 60 s (with any exit
# status: an error or the MPI's abort) and no tierflow shared memory is left in /dev/shm.
set -u
before=$(ls /dev/shm | grep -c '^tierflow-rma-' || true)
start=$(date +%s)
timeout 60 "$@" > /tmp/rma_kill_test.$$ 2>&1
status=$?
took=$(( $(date +%s) - start ))
after=$(ls /dev/shm | grep -c '^tierflow-rma-' || true)
cat /tmp/rma_kill_test.$$ | tail -5
rm -f /tmp/rma_kill_test.$$
if [ "$status" -eq 124 ]; then
  echo "FAIL: the job hung after a rank died (killed after 60 s)"
  exit 1
fi
if [ "$after" -gt "$before" ]; then
  echo "FAIL: $((after - before)) tierflow-rma segment(s) left in /dev/shm"
  exit 1
fi
echo "ok: ended in ${took} s with status ${status}, nothing left in /dev/shm"
