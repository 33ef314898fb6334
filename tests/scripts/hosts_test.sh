#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The multi-host test bed (scripts/hosts.sh).
#
#   hosts_test.sh fixture-up STATE [SHARE]...  the CTest fixture's test bed, owned by ctest
#   hosts_test.sh fixture-down STATE
#   hosts_test.sh isolation      (TIERFLOW_HOSTS set) each host its own name, processes,
#                                /tmp, /dev/shm and address; TCP between hosts
#   hosts_test.sh teardown       nothing is left when the daemon is killed, when the owner
#                                exits, or after `down`; a killed host takes its processes
#   hosts_test.sh bad-input      wrong commands say what is wrong and change nothing
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/../../scripts/hosts.sh"
failures=0

check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# Processes whose command line names the test bed's directory: the daemon, the hosts' holders
# and everything run on the hosts through them.
processes_of() {
  local f p c
  for f in /proc/[0-9]*/cmdline; do
    p=${f#/proc/}
    p=${p%/cmdline}
    c=$( { tr '\0' ' ' <"$f"; } 2>/dev/null) || continue
    [[ "$c" == *"$1"* ]] && echo "$p $c"
  done
}

gone() {  # gone STATE: no process, mount or file of the test bed in STATE is left
  local state=$1 i
  for i in $(seq 100); do
    [ -z "$(processes_of "$state")" ] && [ ! -e "$state/relay.sock" ] && break
    sleep 0.05
  done
  local left
  left=$(processes_of "$state")
  [ -z "$left" ] || { echo "left running: $left"; return 1; }
  ! grep -qF "$state" /proc/self/mountinfo || { echo "left mounted"; return 1; }
  [ "$(ip -o link | grep -c veth)" = "$veths_before" ] || { echo "left a veth here"; return 1; }
}

isolation() {
  local h0 h1
  h0=$("$hosts" run host0 hostname)
  h1=$("$hosts" run host1 hostname)
  check "hosts named host0 and host1 ($h0, $h1)" test "$h0/$h1" = host0/host1
  # A host sees its PID 1 and what runs in it, not the other host's processes.
  "$hosts" run host1 sleep 5 &
  local sleeper=$!
  sleep 0.5
  check "host0 does not see host1's sleep" test -z "$("$hosts" run host0 ps -eo args | grep '^sleep 5')"
  check "host1 sees its own sleep" test -n "$("$hosts" run host1 ps -eo args | grep '^sleep 5')"
  kill "$sleeper" 2>/dev/null
  wait "$sleeper" 2>/dev/null
  local mark="hosts-test-$$"
  "$hosts" run host0 sh -c "touch /dev/shm/$mark /tmp/$mark"
  check "/dev/shm and /tmp of host0 are its own" \
    "$hosts" run host1 sh -c "! test -e /dev/shm/$mark && ! test -e /tmp/$mark"
  check "... and not this machine's" test ! -e "/dev/shm/$mark" -a ! -e "/tmp/$mark"
  "$hosts" run host0 rm -f "/dev/shm/$mark" "/tmp/$mark"
  check "host1 has the address 10.77.0.2 on eth0" \
    "$hosts" run host1 sh -c "ip -o addr show eth0 | grep -q 'inet 10.77.0.2/'"
  # TCP from host0 to host1 by name; the port is the server's choice.
  local port
  "$hosts" run host1 python3 -c "
import socket, sys
s = socket.create_server(('0.0.0.0', 0)); print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.sendall(c.recv(64).upper())" >"$TMPDIR_TEST/port" &
  local server=$!
  for _ in $(seq 100); do [ -s "$TMPDIR_TEST/port" ] && break; sleep 0.05; done
  port=$(cat "$TMPDIR_TEST/port")
  local answer
  answer=$("$hosts" run host0 python3 -c "
import socket
c = socket.create_connection(('host1', $port)); c.sendall(b'across'); print(c.recv(64).decode())")
  wait "$server"
  check "TCP from host0 to host1 by name ($answer)" test "$answer" = ACROSS
}

teardown() {
  local state sleeper
  # The daemon killed with SIGKILL: the hosts die with it; `down` removes the files.
  eval "$("$hosts" up 2)"
  state=$TIERFLOW_HOSTS
  "$hosts" run host1 sleep 60 &
  sleep 0.5
  check "a command runs on host1" test -n "$(processes_of "$state")"
  kill -KILL "$(cat "$state/relay.pid")"
  check "daemon killed: no process, mount or veth left" gone "$state"
  "$hosts" down
  check "down removes the directory" test ! -e "$state"
  # The owner exits: the test bed goes down by itself.
  sleep 60 &
  sleeper=$!
  eval "$("$hosts" up 2 --owner "$sleeper")"
  state=$TIERFLOW_HOSTS
  kill "$sleeper"
  check "owner gone: nothing left" gone "$state"
  check "owner gone: the directory removed" test ! -e "$state"
  # A host killed mid-command: the command's status says so; the other host runs on.
  eval "$("$hosts" up 2)"
  state=$TIERFLOW_HOSTS
  "$hosts" run host1 sleep 60 &
  local job=$!
  sleep 0.5
  "$hosts" kill host1
  wait "$job"
  check "a command on a killed host ends with SIGKILL's status" test $? -eq 137
  check "a killed host runs nothing more" test "$("$hosts" run host1 true 2>&1; echo $?)" != 0
  check "the other host runs on" "$hosts" run host0 true
  "$hosts" down
  check "down: nothing left" gone "$state"
  check "down: the directory removed" test ! -e "$state"
}

bad_input() {
  local out
  out=$(TIERFLOW_HOSTS= "$hosts" run host0 true 2>&1)
  check "run without a test bed says how to start one" grep -q 'hosts.sh up N' <<<"$out"
  out=$("$hosts" up 0 2>&1)
  check "up 0 is refused" grep -q 'number of hosts, 1 to 64' <<<"$out"
  out=$("$hosts" up 2 --pool /nonexistent 2>&1)
  check "a pool that is not a directory is refused" grep -q "is not a directory" <<<"$out"
  mkdir "$TMPDIR_TEST/taken"
  out=$("$hosts" up 2 --state "$TMPDIR_TEST/taken" 2>&1)
  check "an existing --state directory is refused" grep -q "must be new" <<<"$out"
  eval "$("$hosts" up 1)"
  out=$("$hosts" run host7 true 2>&1)
  check "an unknown host is named in the error" grep -q "no host 'host7'" <<<"$out"
  out=$("$hosts" mpirun-args lam 2>&1)
  check "an unknown MPI is refused" grep -q "give openmpi or mpich" <<<"$out"
  local state=$TIERFLOW_HOSTS
  touch "$state/mine"
  "$hosts" down 2>"$TMPDIR_TEST/err"
  check "down leaves files it did not make" test -e "$state/mine"
  check "... and says so" grep -q "did not make" "$TMPDIR_TEST/err"
  rm -f "$state/mine"
  rmdir "$state"
}

TMPDIR_TEST=$(mktemp -d)
trap 'rm -rf "$TMPDIR_TEST"' EXIT
veths_before=$(ip -o link | grep -c veth)
case ${1:-} in
  fixture-up)
    shift
    state=$1
    shift
    shares=()
    for d in "$@"; do shares+=(--share "$d"); done
    # A test bed left by a killed run of ctest: its daemon went with ctest, its files stay.
    [ -d "$state" ] && TIERFLOW_HOSTS=$state "$hosts" down
    "$hosts" up 2 --state "$state" --owner "$PPID" "${shares[@]}" >/dev/null
    exit ;;
  fixture-down) TIERFLOW_HOSTS=$2 exec "$hosts" down ;;
  isolation) isolation ;;
  teardown) teardown ;;
  bad-input) bad_input ;;
  *) echo "usage: hosts_test.sh fixture-up STATE [SHARE]... | fixture-down STATE | isolation | teardown | bad-input" >&2; exit 2 ;;
esac
echo "$failures failures"
[ "$failures" -eq 0 ]
