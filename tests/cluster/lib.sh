# Shared by up.sh and node.sh: how a member (compute node nI or SSH host sJ) of the cluster in
# $STATE is started. Needs STATE and ID set.

# Runs a command in member NAME's network namespace with its own hostname. nsenter, not
# `ip netns exec`: the latter remounts /sys, and slurmd then finds no /sys/fs/cgroup and dies.
in_ns() { # in_ns NAME COMMAND...
  local name=$1; shift
  nsenter --net="/run/netns/octl$ID-$name" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$name" "$@"
}

# Starts the daemon of member NAME: slurmd for nI, sshd for sJ (both detach themselves).
start_member() { # start_member NAME
  case $1 in
    n*) in_ns "$1" /usr/sbin/slurmd -f "$STATE/slurm.conf" -N "$1" ;;
    s*) in_ns "$1" /usr/sbin/sshd -f "$STATE/ssh/sshd.$1.conf" -E "$STATE/log/sshd.$1.log" ;;
  esac
}

# The host end of member NAME's link.
host_link() { echo "oc${ID}h$(awk -v n="$1" '$1 == n {print $2}' "$STATE/members")"; }

# Running, not a zombie: a dead child of ours lingers as one here (PID 1 does not reap).
alive() { [ -r "/proc/$1/stat" ] && ! awk '{exit $3 != "Z"}' "/proc/$1/stat" 2>/dev/null; }
