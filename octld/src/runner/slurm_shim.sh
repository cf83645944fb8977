#!/bin/bash
# The job side of the slurm runner (docs/RUNNERS.md): runs one node's agent in a clone of its
# own and brings its work back by pushing to this attempt's refs in the exchange repository.
#   slurm_shim.sh EXCHANGE BASE_REF PREFIX BRANCH CHECKPOINT_S -- AGENT ARGV...
# PREFIX is refs/octl/remote/<run>/<node>/<attempt>; this copy (Slurm's restart count) pushes
# PREFIX/<copy>/head (the branch) and PREFIX/<copy>/wip (its work tree and index as a commit on
# top of head, made with a private index: the agent's branch gets no checkpoint commits):
# every CHECKPOINT_S seconds, on exit, and on TERM/USR1. Exit 90: the clone failed, 91: the
# start point is missing, 92: a push was refused, 93: tmux failed, 143: stopped after a checkpoint.
set -uo pipefail
EXCHANGE=$1 BASE=$2 PREFIX=$3 BRANCH=$4 EVERY=$5
shift 5
[ "${1:-}" = -- ] && shift
# The SSH runner (runner/ssh) names the copy and the clone's place itself, and may give a
# checkpoint of the attempt before (OCTL_BASE_WIP: uncommitted work on top of BASE).
COPY=${OCTL_COPY:-${SLURM_RESTART_COUNT:-0}}
REF=$PREFIX/$COPY
WD=${OCTL_CLONE:-${TMPDIR:-/tmp}/octl-job-${SLURM_JOB_ID:-$$}-$COPY}
export GIT_AUTHOR_NAME=${GIT_AUTHOR_NAME:-octl} GIT_AUTHOR_EMAIL=${GIT_AUTHOR_EMAIL:-octl@localhost}
export GIT_COMMITTER_NAME=${GIT_COMMITTER_NAME:-octl} GIT_COMMITTER_EMAIL=${GIT_COMMITTER_EMAIL:-octl@localhost}

rm -rf "$WD"
# Earlier copies of this job that a lost node left here (where the scratch directory is
# shared, or the job came back to the same node): their work is in the exchange already.
if [ -z "${OCTL_CLONE:-}" ]; then
  for ((c = 0; c < COPY; c++)); do rm -rf "${TMPDIR:-/tmp}/octl-job-${SLURM_JOB_ID:-$$}-$c" "${TMPDIR:-/tmp}/octl-job-${SLURM_JOB_ID:-$$}-$c.rc"; done
fi
# Not `git clone`: the exchange has no branch to check out, and clone would say so in the log.
git init -q "$WD" && cd "$WD" && git remote add origin "$EXCHANGE" || exit 90
git fetch -q origin "+$PREFIX/*:$PREFIX/*" "+$BASE:$BASE" ${OCTL_BASE_WIP:+"+$OCTL_BASE_WIP:$OCTL_BASE_WIP"} 2>/dev/null
# Resume from the newest checkpoint of an earlier copy of this attempt, else from the base.
HEAD0=$(git rev-parse -q --verify "$BASE^{commit}") || exit 91
WIP0=
[ -z "${OCTL_BASE_WIP:-}" ] || WIP0=$(git rev-parse -q --verify "$OCTL_BASE_WIP^{commit}") || exit 91
EARLIER=$COPY                     # the SSH runner gives the resume point itself (its hosts'
[ -z "${OCTL_COPY:-}" ] || EARLIER=0 # repositories may hold refs of a copy it gave up on)
for ((c = EARLIER - 1; c >= 0; c--)); do
  h=$(git rev-parse -q --verify "$PREFIX/$c/head^{commit}") || continue
  HEAD0=$h; WIP0=$(git rev-parse -q --verify "$PREFIX/$c/wip^{commit}")
  break
done
git checkout -q -B "$BRANCH" "$HEAD0" || exit 91
[ -z "$WIP0" ] || git read-tree -u -m HEAD "$WIP0" || exit 91
echo "octl: job ${SLURM_JOB_ID:-${OCTL_JOB:-?}} copy $COPY on $(hostname) in $WD from ${WIP0:-$HEAD0}"

LAST_HEAD= LAST_WIP=
push() { # push WHAT SHA LAST: SHA to $REF/WHAT, only over what this copy pushed last
  git push -q --force-with-lease="$REF/$1:$3" origin "$2:$REF/$1"
}
checkpoint() {
  local head tree wip idx
  head=$(git rev-parse HEAD) || return 1
  if [ "$head" != "$LAST_HEAD" ]; then push head "$head" "$LAST_HEAD" || return 1; LAST_HEAD=$head; fi
  idx=$(mktemp) || return 1
  GIT_INDEX_FILE=$idx git read-tree HEAD && GIT_INDEX_FILE=$idx git add -A . &&
    tree=$(GIT_INDEX_FILE=$idx git write-tree)
  rm -f "$idx"
  [ -n "${tree:-}" ] || return 1
  if [ "$tree" = "$(git rev-parse "HEAD^{tree}")" ]; then
    wip=$head                       # nothing uncommitted: the checkpoint is the branch
  else
    wip=$(git commit-tree -p HEAD -m "octl checkpoint of copy $COPY" "$tree") || return 1
  fi
  if [ "$wip" != "$LAST_WIP" ]; then push wip "$wip" "$LAST_WIP" || return 1; LAST_WIP=$wip; fi
}

# The agent runs in a tmux server of the job's own, in the foreground under the job (a daemonised
# server would escape Slurm's process tracking, and scancel), so `srun --jobid JOB --overlap
# --pty tmux -L octl-JOB attach -t agent` reaches it (`run attach`). Its output goes to the
# node's log ($OCTL_JOB_LOG, else the job's output) through pipe-pane, as a local agent's does;
# its exit status to $RC, after which the wrapper wakes this script (USR2).
export OCTL_WORKTREE=$WD
unset TMUX TMUX_PANE
SOCK=octl-${SLURM_JOB_ID:-$$}
RC=$WD.rc
LOG=${OCTL_JOB_LOG:-/proc/$$/fd/1}
rm -f "$RC"
T() { tmux -L "$SOCK" -f /dev/null "$@"; }
SOCKET=${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK
rm -f "$SOCKET"   # a killed earlier copy's, where /tmp is shared
trap : USR2   # before the agent starts: it may end at once
T -D &
SERVER=$!
# Only once it listens: a client finding no server would start a daemonised one.
for _ in $(seq 250); do [ -S "$SOCKET" ] && break; sleep 0.02; done
T new-session -d -s agent -x 200 -y 50 -c "$WD" -- /bin/sh -c '"$@"; echo $? > "$0.tmp" && mv "$0.tmp" "$0"; kill -USR2 '$$ "$RC" "$@" \; \
  pipe-pane -o -t agent "exec cat >> '${LOG//#/##}'" || { echo "octl: cannot start the agent's tmux"; exit 93; }
AGENT=$(T display-message -p -t agent '#{pane_pid}')
# Everything is in the exchange once the last checkpoint is pushed: the clone goes (kept when
# a push failed, so nothing is lost).
cleanup() { cd / && rm -rf "$WD" "$WD.rc"; }
finish() { T kill-server 2>/dev/null; kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; rm -f "$SOCKET"; }
stopped() {
  kill -TERM -- "-$AGENT" 2>/dev/null
  for _ in $(seq 100); do [ -e "$RC" ] && break; T has-session -t agent 2>/dev/null || break; sleep 0.1; done
  finish; checkpoint && cleanup; echo "octl: stopped"; exit 143
}
trap stopped TERM USR1
while [ ! -e "$RC" ] && T has-session -t agent 2>/dev/null; do
  sleep "$EVERY" & wait $!
  kill "$!" 2>/dev/null
  [ -e "$RC" ] || checkpoint
done
RC=$(cat "$RC" 2>/dev/null || echo 137)
finish
checkpoint || { echo "octl: the push of the result was refused"; exit 92; }
cleanup
exit "$RC"
