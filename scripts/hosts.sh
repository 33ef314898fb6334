#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A test bed of N "hosts" on this machine, each with network, UTS, IPC, mount and PID
# namespaces of its own, for running MPI jobs across hosts (docs/hosts.md).
#
#   eval "$(scripts/hosts.sh up N [--pool DIR] [--share DIR]... [--state DIR] [--owner PID])"
#   scripts/hosts.sh run HOST CMD...          run CMD on HOST (host0 ... hostN-1)
#   scripts/hosts.sh mpirun-args openmpi|mpich [RANKS_PER_HOST]
#   scripts/hosts.sh kill HOST                kill every process of HOST (a node that dies)
#   scripts/hosts.sh down
#
# `up` prints TIERFLOW_HOSTS=STATE for the other commands. The test bed goes down with `down`,
# when the owner (default: the process that called `up`) exits, or when its daemon is killed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
relay="$here/hosts_relay.py"

fail() {
  echo "hosts.sh: $*" >&2
  exit 2
}

state_dir() {
  [ -n "${TIERFLOW_HOSTS:-}" ] || fail "TIERFLOW_HOSTS is not set: run eval \"\$(scripts/hosts.sh up N)\" first"
  [ -d "$TIERFLOW_HOSTS" ] && [ ! -L "$TIERFLOW_HOSTS" ] ||
    fail "TIERFLOW_HOSTS=$TIERFLOW_HOSTS is not a test bed's directory"
  echo "$TIERFLOW_HOSTS"
}

# The files that make the hosts reachable by name and by MPI launchers.
write_files() {
  local state=$1 n=$2 i
  {
    echo "127.0.0.1 localhost"
    for ((i = 0; i < n; i++)); do echo "10.77.0.$((i + 1)) host$i"; done
  } >"$state/etc-hosts"
  printf '#!/bin/sh\nexec "%s" "%s" client "%s" agent "$@"\n' "$(command -v python3)" "$relay" \
    "$state" >"$state/agent"
  chmod 0700 "$state/agent"
  chmod 0644 "$state/etc-hosts"
}

cmd_up() {
  local n=${1:-} state="" owner=$PPID shares=() pool=""
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 64)) || fail "up: give the number of hosts, 1 to 64 (got '${n}')"
  shift
  while (($#)); do
    case $1 in
      --pool | --share)
        [ $# -ge 2 ] && [ -d "$2" ] || fail "$1: '${2:-}' is not a directory"
        [ "$1" = --pool ] && pool=$(cd "$2" && pwd)
        shares+=("$(cd "$2" && pwd)")
        shift 2 ;;
      --state) [ $# -ge 2 ] || fail "--state needs a directory that does not exist yet"
        state=$2; shift 2 ;;
      --owner) [[ "${2:-}" =~ ^[0-9]+$ ]] && kill -0 "$2" 2>/dev/null || fail "--owner: no process '${2:-}'"
        owner=$2; shift 2 ;;
      *) fail "up: unknown option '$1' (options: --pool DIR, --share DIR, --state DIR, --owner PID)" ;;
    esac
  done
  [ "$(id -u)" -eq 0 ] || fail "up: namespaces, mounts and veths need root"
  if [ -n "$state" ]; then
    mkdir -m 0700 "$state" 2>/dev/null || fail "--state $state: exists or cannot be made (it must be new)"
    state=$(cd "$state" && pwd)
  else
    state=$(mktemp -d "${TMPDIR:-/tmp}/tierflow-hosts.XXXXXX")
  fi
  write_files "$state" "$n"
  setsid python3 "$relay" serve "$state" "$n" "$owner" "${shares[@]}" </dev/null >"$state/relay.log" 2>&1 &
  echo $! >"$state/relay.pid"
  local waited=0
  until [ -e "$state/ready" ] || [ -e "$state/error" ] || ! kill -0 "$(cat "$state/relay.pid")" 2>/dev/null; do
    sleep 0.05
    waited=$((waited + 1))
    ((waited < 1200)) || break
  done
  if [ ! -e "$state/ready" ]; then
    local why
    why=$(cat "$state/error" "$state/relay.log" 2>/dev/null || true)
    TIERFLOW_HOSTS=$state cmd_down
    fail "up: the hosts did not start: ${why:-no reason given}"
  fi
  echo "TIERFLOW_HOSTS=$state; export TIERFLOW_HOSTS${pool:+; TIERFLOW_HOSTS_POOL=$pool; export TIERFLOW_HOSTS_POOL}"
}

# Stops the daemon, which kills the hosts and removes the files the test bed made (nothing
# else); removes them here when the daemon was killed before it could.
cmd_down() {
  local state pid
  state=$(state_dir)
  if [ -f "$state/relay.pid" ]; then
    pid=$(cat "$state/relay.pid")
    # Only our daemon: its command line names this state directory.
    if [[ "$pid" =~ ^[0-9]+$ ]] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF "serve $state "; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  [ -d "$state" ] || return 0
  local f
  for f in relay.sock relay.pid relay.log ready error etc-hosts agent; do
    rm -f "${state:?}/$f"
  done
  rmdir "$state" 2>/dev/null || echo "hosts.sh: left $state (it holds files the test bed did not make)" >&2
}

cmd_mpirun_args() {
  local state mpi=${1:-} per=${2:-1} n
  state=$(state_dir)
  n=$(grep -c ' host' "$state/etc-hosts")
  [[ "$per" =~ ^[0-9]+$ ]] && ((per >= 1)) || fail "mpirun-args: ranks per host must be a positive number"
  local hosts="" i
  for ((i = 0; i < n; i++)); do hosts+="${hosts:+,}host$i:$per"; done
  case $mpi in
    openmpi) echo "--mca plm_rsh_agent $state/agent --mca plm_rsh_no_tree_spawn 1 --host $hosts" ;;
    mpich) echo "-launcher ssh -launcher-exec $state/agent -hosts $hosts" ;;
    *) fail "mpirun-args: give openmpi or mpich (got '${mpi}')" ;;
  esac
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  run | kill)
    op=$1; shift
    state=$(state_dir) || exit 2
    exec python3 "$relay" client "$state" "$op" "$@" ;;
  mpirun-args) shift; cmd_mpirun_args "$@" ;;
  *) fail "usage: hosts.sh up N [--pool DIR] [--share DIR]... | run HOST CMD... | mpirun-args openmpi|mpich [RANKS_PER_HOST] | kill HOST | down" ;;
esac
