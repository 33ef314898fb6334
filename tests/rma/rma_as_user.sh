#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs an MPI test program as an unprivileged user: as root, under a uid no account uses, with
# the program copied into a private temporary directory that user can read (the build tree
# may not be). Usage: rma_as_user.sh PROGRAM LAUNCHER [ARGS...]: LAUNCHER ARGS PROGRAM.
set -euo pipefail
program=$1
shift
if [ "$(id -u)" -ne 0 ]; then
  exec "$@" "$program"
fi
uid=""
for candidate in $(seq 54321 54400); do
  # No account has it and no process runs as it (coreutils only: procps may be missing).
  if ! getent passwd "$candidate" >/dev/null &&
    ! stat -c %u /proc/[0-9]* 2>/dev/null | grep -qx "$candidate"; then
    uid=$candidate
    break
  fi
done
if [ -z "$uid" ]; then
  echo "rma_as_user.sh: no unused uid in 54321-54400" >&2
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf -- "$dir"' EXIT
cp -- "$program" "$dir/"
chown -R "$uid:$uid" "$dir"
chmod 700 "$dir"
cd "$dir"
setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
  env HOME="$dir" TMPDIR="$dir" "$@" "$dir/$(basename -- "$program")"
