#!/usr/bin/env bash
# Faults for one member of a cluster started by up.sh (compute node nI or SSH host sJ):
#   node.sh STATE_DIR kill NAME     the machine dies: kill -9 of every process in its namespace
#                                   (its slurmd or sshd and every job or session on it)
#   node.sh STATE_DIR stop NAME     kill -9 of its slurmd or sshd only: what runs there goes on,
#                                   cut off from the controller (a copy the cluster gave up on)
#   node.sh STATE_DIR start NAME    starts its slurmd or sshd again
#   node.sh STATE_DIR cut NAME      its link goes down (processes go on, unreachable)
#   node.sh STATE_DIR join NAME     its link comes back
#   node.sh STATE_DIR pause ctl     slurmctld stops answering (SIGSTOP: it holds its state,
#                                   every client call waits for its timeout); jobs go on
#   node.sh STATE_DIR resume ctl    it answers again (SIGCONT)
set -euo pipefail
STATE=${1:?usage: node.sh STATE_DIR kill|stop|start|cut|join NAME}
ACTION=${2:?action}; NAME=${3:?member name}
[ -f "$STATE/id" ] || { echo "node.sh: $STATE is not a cluster state dir" >&2; exit 1; }
ID=$(cat "$STATE/id")
if [ "$NAME" = ctl ]; then
  case $ACTION in
    pause)  kill -STOP "$(cat "$STATE/pids/slurmctld")" ;;
    resume) kill -CONT "$(cat "$STATE/pids/slurmctld")" ;;
    *) echo "node.sh: the controller is paused or resumed, not $ACTION" >&2; exit 1 ;;
  esac
  exit 0
fi
grep -q "^$NAME " "$STATE/members" || { echo "node.sh: no member $NAME in $STATE" >&2; exit 1; }
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
daemon_pid() { case $NAME in n*) cat "$STATE/pids/slurmd.$NAME" ;; s*) cat "$STATE/pids/sshd.$NAME" ;; esac; }
case $ACTION in
  kill)  pids=$(ip netns pids "octl$ID-$NAME"); [ -z "$pids" ] || kill -KILL $pids ;;
  stop)  p=$(daemon_pid); alive "$p" && kill -KILL "$p" ;;
  start) start_member "$NAME" ;;
  cut)   ip link set "$(host_link "$NAME")" down ;;
  join)  ip link set "$(host_link "$NAME")" up ;;
  *) echo "node.sh: unknown action $ACTION (kill, stop, start, cut or join)" >&2; exit 1 ;;
esac
