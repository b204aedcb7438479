#!/usr/bin/env bash
# A single-node Slurm for the tests that submit jobs (examples/convert-parts):
#
#   .ci/slurm.sh start DIR   # then: export SLURM_CONF=DIR/slurm.conf
#   .ci/slurm.sh stop DIR
#
# start runs munged, slurmctld and slurmd as plain background processes, as root, with
# their configuration, key, sockets, state and logs all in DIR: no systemd, no cgroups
# (processes are tracked by parent pid and tasks are not confined), so it works in a
# container. The one node, localhost, offers this machine's CPUs and a modest share of
# its memory in one partition, ci. start returns once sinfo shows the node idle, or fails
# with the daemons' logs after 60 s. It needs the Debian packages slurm-wlm and munge.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# = 2 ] || usage
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
export SLURM_CONF=$dir/slurm.conf

stop() {
  local pidfile pid
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

logs() {
  local f
  for f in "$dir"/munged.log "$dir"/slurmctld.log "$dir"/slurmd.log; do
    [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f"; }
  done >&2
}

start() {
  mkdir -p "$dir/state" "$dir/spool"
  chmod 700 "$dir"
  # munged insists on a key only its owner can read.
  if [ ! -f "$dir/munge.key" ]; then
    (umask 077; head -c 1024 /dev/urandom >"$dir/munge.key")
  fi
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed"

  local cpus mem
  cpus=$(nproc)
  # Half the memory, at most 4 GiB: jobs that ask for more than the node has pend forever.
  mem=$(awk '/^MemTotal:/ { m = int($2 / 1024 / 2); print (m > 4096 ? 4096 : m) }' /proc/meminfo)
  cat >"$SLURM_CONF" <<EOF
ClusterName=ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=localhost CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=ci Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF" -N localhost

  local state=""
  for _ in $(seq 120); do
    state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    [ "$state" = idle ] && return 0
    sleep 0.5
  done
  echo "slurm: node localhost is ${state:-unreachable}, not idle, after 60 s" >&2
  logs
  stop
  exit 1
}

case $cmd in
start) start ;;
stop) stop ;;
*) usage ;;
esac
