#!/usr/bin/env bash
# Stops what tests/cluster/up.sh started in STATE_DIR and removes it (KEEP=1 keeps the dir and
# its logs). Only by pid file and path: a process is stopped only if it runs in one of this
# cluster's network namespaces or its command line names STATE_DIR; nothing else is touched.
set -uo pipefail
STATE=${1:?usage: down.sh STATE_DIR}
[ -f "$STATE/id" ] || { echo "cluster/down.sh: $STATE is not a cluster state dir" >&2; exit 1; }
STATE=$(cd "$STATE" && pwd)
ID=$(cat "$STATE/id")
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$STATE"; }
stop() { # stop PID...: TERM, then KILL what is still running after 3 s
  local p; for p in "$@"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 30); do
    local left=0; for p in "$@"; do alive "$p" && left=1; done
    [ $left = 0 ] && return; sleep 0.1
  done
  for p in "$@"; do alive "$p" && kill -KILL "$p" 2>/dev/null; done
}

# Everything inside our namespaces is ours: slurmd, sshd, and the jobs and sessions under them.
pids=()
if [ -f "$STATE/netns" ]; then
  while read -r ns; do pids+=($(ip netns pids "$ns" 2>/dev/null)); done <"$STATE/netns"
fi
# slurmctld and munged run on the host: their pid files, if the process still names STATE.
for f in "$STATE"/pids/*; do
  [ -f "$f" ] || continue
  p=$(cat "$f"); alive "$p" && ours "$p" && pids+=("$p")
done
((${#pids[@]})) && stop "${pids[@]}"

if [ -f "$STATE/netns" ]; then
  while read -r ns; do ip netns del "$ns" 2>/dev/null; done <"$STATE/netns"
fi
# A veth pair goes with its namespace end; remove any host end left behind.
for l in $(ip -o link 2>/dev/null | awk -F': ' -v pre="oc${ID}h" 'index($2, pre) == 1 {sub(/@.*/, "", $2); print $2}'); do
  ip link del "$l" 2>/dev/null
done
[ -f "$STATE/lock" ] && rmdir "$(cat "$STATE/lock")" 2>/dev/null
if [ "${KEEP:-0}" = 1 ]; then echo "kept $STATE"; else rm -rf -- "$STATE"; fi
exit 0
