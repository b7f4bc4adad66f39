#!/usr/bin/env bash
# slurm-local.sh - a one-node Slurm cluster on this machine (Debian's slurm-wlm and munge), so
# tests/slurm.rs and docs/distributed.md run sharded benchmarks under a real srun/sbatch.
#
#   slurm-local.sh start    install slurm-wlm when missing (apt-get; needs root), configure this
#                           host as node and controller (8 task slots whatever the core count,
#                           so 3-4 ranks fit on 2 cores), start munged, slurmctld and slurmd,
#                           and wait (30 s at most) for the node to be idle. A no-op when a node
#                           already answers idle.
#   slurm-local.sh status   print the node's state; exit 1 when no node answers
#   slurm-local.sh stop     stop the slurmctld and slurmd started here (munged stays)
#
# Logs, state and pid files under $SLURM_LOCAL_DIR (default /tmp/slurm-local). Writes
# /etc/slurm/slurm.conf and, when absent, /etc/munge/munge.key. Progress goes to stderr.
# VLLM_BENCH_NO_INSTALL=1: `start` fails instead of installing (the tests set it unless CI).
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/slurm-local}
say() { echo "slurm-local.sh: $*" >&2; }
fail() { say "error: $*"; exit 1; }

node_state() { sinfo -h -o %T 2>/dev/null | head -n 1; }

install() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && return 0
    [ "${VLLM_BENCH_NO_INSTALL:-0}" != 1 ] ||
        fail "Slurm is not installed; run scripts/servers/slurm-local.sh start (as root)"
    [ "$(id -u)" = 0 ] || fail "slurm-wlm is missing; as root: apt-get install slurm-wlm"
    command -v apt-get >/dev/null || fail "no apt-get here: install Slurm (slurmctld, slurmd, munge) by hand"
    say "installing slurm-wlm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q slurm-wlm >&2 ||
        { apt-get update -q >&2 && apt-get install -y -q slurm-wlm >&2; } ||
        fail "apt-get install slurm-wlm failed"
}

configure() {
    local host mem_mb
    host=$(hostname -s)
    mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) - 1024 }' /proc/meminfo)
    mkdir -p "$DIR/state" "$DIR/spool" /etc/slurm
    # config_overrides: slurmd accepts the declared 8 CPUs on a smaller machine.
    cat >/etc/slurm/slurm.conf <<CONF
ClusterName=vllm-bench-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
    if [ ! -f /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        head -c 1024 /dev/urandom >/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key 2>/dev/null || true
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge
    chown munge:munge /run/munge 2>/dev/null || true
}

start() {
    case $(node_state) in idle* | mix* | alloc*) return 0 ;; esac
    install
    configure
    pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged 2>/dev/null ||
        /usr/sbin/munged --force || fail "munged did not start"
    pgrep -x slurmctld >/dev/null || slurmctld || fail "slurmctld did not start; see $DIR/slurmctld.log"
    pgrep -x slurmd >/dev/null || slurmd || fail "slurmd did not start; see $DIR/slurmd.log"
    for _ in $(seq 60); do
        case $(node_state) in idle* | mix*) return 0 ;; esac
        sleep 0.5
    done
    fail "the node is not idle after 30 s (state: '$(node_state)'); logs in $DIR"
}

stop() {
    local name pid
    for name in slurmd slurmctld; do
        pid=$(cat "$DIR/$name.pid" 2>/dev/null || true)
        [[ $pid =~ ^[0-9]+$ ]] && kill "$pid" 2>/dev/null || true
    done
}

case ${1:-} in
start) start ;;
stop) stop ;;
status)
    state=$(node_state)
    [ -n "$state" ] || fail "no Slurm node answers"
    echo "$state"
    ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
