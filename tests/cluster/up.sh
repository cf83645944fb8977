#!/usr/bin/env bash
# Starts a throwaway Slurm cluster and SSH hosts on this machine, for the tests of remote runners.
#
#   tests/cluster/up.sh [STATE_DIR]     prints the state dir on its last line
#   tests/cluster/up.sh --install       only installs the packages (CI's tools step)
#   tests/cluster/node.sh STATE_DIR ACTION NAME   kill / restart / cut / join one node or host
#   tests/cluster/down.sh STATE_DIR
#
# What runs (all of it started by this script, every file under STATE_DIR):
#   - munged on its own socket and key;
#   - slurmctld on the host, reachable from the nodes at 10.<net>.1.1;
#   - compute nodes n1..n$NODES: one slurmd each, in its own network namespace (10.<net>.<i>.2)
#     with its own hostname (UTS namespace);
#   - SSH hosts s1..s$SSH_HOSTS: one sshd each, in its own network namespace, root login with
#     a key generated here.
# The namespaces separate the network only: every node and host sees this machine's whole
# filesystem (/work, /tmp, STATE_DIR). A remote runner must still behave as if they did not.
#
# $STATE_DIR/env is a shell file exporting SLURM_CONF, OCTL_CLUSTER_* and the SSH settings; the
# tests read it. Needs root, iproute2 with `ip netns`, and nsenter/unshare (util-linux). Installs
# slurmctld, slurmd, slurm-client, munge and openssh from Debian when they are missing.
set -euo pipefail
install_only=
[ "${1:-}" = --install ] && { install_only=1; shift; }
NODES=${NODES:-3}
SSH_HOSTS=${SSH_HOSTS:-2}
NODE_CPUS=${NODE_CPUS:-8}      # more than the machine has: agents mostly wait (config_overrides)
NODE_MEM_MB=${NODE_MEM_MB:-4000}
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "cluster/up.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, slurmd)"
command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || die "needs iproute2 with 'ip netns'"
command -v nsenter >/dev/null && command -v unshare >/dev/null || die "needs nsenter and unshare (util-linux)"

# --- packages -------------------------------------------------------------------------------
need=()
for p in slurmctld:slurmctld slurmd:slurmd sinfo:slurm-client munged:munge sshd:openssh-server \
         ssh:openssh-client ssh-keygen:openssh-client; do
  [ -x "/usr/sbin/${p%%:*}" ] || command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
done
if ((${#need[@]})); then
  echo "installing: ${need[*]}" >&2
  # Packages must not start their services (there is no init here, and the tests start their
  # own): a policy-rc.d that says no, only for the time of the install, if there is none.
  policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d; printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
  [ -z "$policy" ] || rm -f "$policy"
fi
[ -z "$install_only" ] || exit 0

# --- state dir and a network block no other cluster of ours uses -----------------------------
STATE=${1:-$(mktemp -d "${TMPDIR:-/tmp}/octl-cluster.XXXXXX")}
mkdir -p "$STATE"; STATE=$(cd "$STATE" && pwd)
[ ! -e "$STATE/env" ] || die "$STATE already holds a cluster (run down.sh on it first)"
chmod 0755 "$STATE"           # munged runs as the munge user and must reach its files
# The id picks the namespaces' names (octl<ID>-n1 …) and the addresses 10.<200+ID>.<i>.0/24.
ID=
for i in $(seq 1 50); do
  if ! ip netns list | grep -q "^octl$i-" && mkdir "/run/octl-cluster-$i.lock" 2>/dev/null; then ID=$i; break; fi
done
[ -n "$ID" ] || die "no free cluster id (50 clusters running?)"
echo "$ID" >"$STATE/id"
# The test process that owns the cluster: the harness stops clusters whose owner died.
[ -z "${OCTL_CLUSTER_OWNER:-}" ] || echo "$OCTL_CLUSTER_OWNER" >"$STATE/owner"
echo "/run/octl-cluster-$ID.lock" >"$STATE/lock"
NET=$((200 + ID))
CTL_PORT=$((16800 + 2 * ID))  # slurmctld listens on the host: one port per cluster
CTL_ADDR=10.$NET.1.1
mkdir -p "$STATE"/{log,pids,spool,munge,ssh}

# One veth pair per namespace: host side 10.NET.i.1, namespace side 10.NET.i.2, default route
# to the host (without it jobs hang: the node cannot reach the controller's other addresses).
# Numbering: compute nodes take 1..NODES, SSH hosts come after.
netns() { # netns INDEX NAME
  local i=$1 ns=octl$ID-$2 h=oc${ID}h$1 p=oc${ID}p$1
  ip netns add "$ns"
  echo "$ns" >>"$STATE/netns"
  echo "$2 $i" >>"$STATE/members"
  ip link add "$h" type veth peer name "$p"
  ip link set "$p" netns "$ns"
  ip addr add "10.$NET.$i.1/24" dev "$h"; ip link set "$h" up
  ip -n "$ns" addr add "10.$NET.$i.2/24" dev "$p"
  ip -n "$ns" link set "$p" up; ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "10.$NET.$i.1"
}
. "$here/lib.sh"

# --- munge ----------------------------------------------------------------------------------
MUNGE_SOCKET=$STATE/munge/munge.socket
dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$STATE/munge"; chmod 0700 "$STATE/munge"; chmod 0400 "$STATE/munge/munge.key"
# --force: the state dir lives under /tmp, whose sticky world-writable mode munged dislikes.
runuser -u munge -- /usr/sbin/munged --force --socket="$MUNGE_SOCKET" \
  --key-file="$STATE/munge/munge.key" --pid-file="$STATE/munge/munged.pid" \
  --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/munged.seed"
cp "$STATE/munge/munged.pid" "$STATE/pids/munged"
# Ask munge itself, not the process list: a dead munged lingers as a zombie here (PID 1 does
# not reap), so pgrep would find it.
munge_ok() { munge -n --socket="$MUNGE_SOCKET" </dev/null 2>/dev/null | unmunge --socket="$MUNGE_SOCKET" >/dev/null 2>&1; }
for _ in $(seq 100); do munge_ok && break; sleep 0.05; done
munge_ok || die "munged does not answer on $MUNGE_SOCKET (see $STATE/munge/munged.log)"

# --- slurm ----------------------------------------------------------------------------------
nodes=
for i in $(seq 1 "$NODES"); do
  netns "$i" "n$i"
  nodes+="NodeName=n$i NodeAddr=10.$NET.$i.2 CPUs=$NODE_CPUS RealMemory=$NODE_MEM_MB State=UNKNOWN
"
done
export SLURM_CONF=$STATE/slurm.conf
# The defaults are made for real clusters and are slow for tests: a batch job waits 3 s to be
# scheduled, a requeued one the credential's life (120 s), a dead node is noticed after 300 s.
cat >"$SLURM_CONF" <<CONF
ClusterName=octl$ID
SlurmctldHost=$(hostname -s)($CTL_ADDR)
SlurmctldPort=$CTL_PORT
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=10
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=5
MinJobAge=3600
KillWait=10
StateSaveLocation=$STATE/spool/slurmctld
SlurmdSpoolDir=$STATE/spool/slurmd.%n
SlurmdPidFile=$STATE/pids/slurmd.%n
SlurmdLogFile=$STATE/log/slurmd.%n.log
SlurmctldPidFile=$STATE/pids/slurmctld
SlurmctldLogFile=$STATE/log/slurmctld.log
${nodes}PartitionName=agents Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$STATE/spool/slurmctld"
/usr/sbin/slurmctld -f "$SLURM_CONF"      # fresh state dir: a clean start
for i in $(seq 1 "$NODES"); do
  mkdir -p "$STATE/spool/slurmd.n$i"
  start_member "n$i"
done

# --- ssh hosts ------------------------------------------------------------------------------
ssh-keygen -q -t ed25519 -N '' -f "$STATE/ssh/id" -C octl-cluster
ssh-keygen -q -t ed25519 -N '' -f "$STATE/ssh/host_key"
cp "$STATE/ssh/id.pub" "$STATE/ssh/authorized_keys"
mkdir -p /run/sshd                         # sshd's privilege-separation dir (Debian's path)
: >"$STATE/ssh/config"
for j in $(seq 1 "$SSH_HOSTS"); do
  i=$((NODES + j)); name=s$j
  netns "$i" "$name"
  cat >"$STATE/ssh/sshd.$name.conf" <<CONF
ListenAddress 10.$NET.$i.2
HostKey $STATE/ssh/host_key
AuthorizedKeysFile $STATE/ssh/authorized_keys
PidFile $STATE/pids/sshd.$name
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv LANG LC_*
MaxSessions 100
MaxStartups 100:30:200
Subsystem sftp internal-sftp
CONF
  start_member "$name"
  cat >>"$STATE/ssh/config" <<CONF
Host $name
  HostName 10.$NET.$i.2
  User root
  IdentityFile $STATE/ssh/id
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile $STATE/ssh/known_hosts
  LogLevel ERROR
CONF
done

# `ssh` with this cluster's config, for processes that cannot be given -F (a daemon under test
# runs plain `ssh HOST`): put $STATE/bin first on their PATH. ssh reads ~/.ssh of the passwd
# entry, not $HOME, so a test home cannot carry the config.
mkdir -p "$STATE/bin"
printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$STATE/ssh/config" >"$STATE/bin/ssh"
chmod +x "$STATE/bin/ssh"

cat >"$STATE/env" <<ENV
export SLURM_CONF=$SLURM_CONF
export OCTL_CLUSTER_DIR=$STATE
export OCTL_CLUSTER_NODES="$(seq -s ' ' -f 'n%g' 1 "$NODES")"
export OCTL_CLUSTER_PARTITION=agents
export OCTL_CLUSTER_SSH_HOSTS="$(seq -s ' ' -f 's%g' 1 "$SSH_HOSTS")"
export OCTL_CLUSTER_SSH_CONFIG=$STATE/ssh/config
export OCTL_CLUSTER_SSH_KEY=$STATE/ssh/id
export OCTL_CLUSTER_BIN=$STATE/bin
ENV
for j in $(seq 1 "$SSH_HOSTS"); do echo "export OCTL_CLUSTER_ADDR_s$j=10.$NET.$((NODES + j)).2" >>"$STATE/env"; done
for i in $(seq 1 "$NODES"); do echo "export OCTL_CLUSTER_ADDR_n$i=10.$NET.$i.2" >>"$STATE/env"; done

# --- ready when every node is idle and every host answers -----------------------------------
ready=
for _ in $(seq 300); do
  [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -ge "$NODES" ] && { ready=1; break; }
  sleep 0.1
done
[ -n "$ready" ] || { sinfo -N >&2 || true; "$here/down.sh" "$STATE" >&2; die "the nodes did not become idle in 30 s"; }
for j in $(seq 1 "$SSH_HOSTS"); do
  ok=
  for _ in $(seq 100); do
    ssh -F "$STATE/ssh/config" -o BatchMode=yes -o ConnectTimeout=2 "s$j" true 2>/dev/null && { ok=1; break; }
    sleep 0.1
  done
  [ -n "$ok" ] || { "$here/down.sh" "$STATE" >&2; die "ssh host s$j does not answer"; }
done
echo "$STATE"
