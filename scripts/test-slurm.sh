#!/usr/bin/env bash
# A single-node Slurm cluster on localhost for the Slurm launcher tests,
# started by hand (no systemd): munged on a private socket, slurmctld and
# slurmd on the given ports, every file under DIR.
#   scripts/test-slurm.sh start DIR CTLD_PORT SLURMD_PORT [OWNER]
#       prints `export SLURM_CONF=...` once the node is idle; with OWNER (a
#       pid), the cluster is stopped as soon as that process is gone
#   scripts/test-slurm.sh stop DIR
#       cancels every job, then stops the daemons by their pid files
# Needs slurmctld, slurmd, slurm-client and munge (scripts/setup-test-env.sh
# installs them) and root (the daemons run jobs as the submitting user).
set -euo pipefail
cmd="$1" dir="$2"

# watch_owner OWNER and end_watcher.
source "$(dirname "$(readlink -f "$0")")/test-owner.sh"
case "$cmd" in
start)
    ctld_port="$3" slurmd_port="$4"
    node="$(hostname -s)"
    mkdir -p "$dir"/{state,spool,log,munge}
    chmod 755 "$dir"
    chown munge:munge "$dir/munge"
    chmod 755 "$dir/munge"
    # A fresh key per cluster; munged refuses keys others can read.
    dd if=/dev/urandom bs=1 count=1024 of="$dir/munge/munge.key" 2>/dev/null
    chown munge:munge "$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
    runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/munge.key" \
        --socket="$dir/munge/munge.sock" --pid-file="$dir/munge/munged.pid" \
        --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
    cpus="$(nproc)"
    cat >"$dir/slurm.conf" <<CONF
ClusterName=servebench-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MinJobAge=600
KillWait=5
ReturnToService=2
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    watch_owner "${5:-}"
    for _ in $(seq 150); do
        if sinfo -h -o '%t' 2>/dev/null | grep -qx idle; then
            echo "export SLURM_CONF='$SLURM_CONF'"
            exit 0
        fi
        sleep 0.2
    done
    echo "the Slurm node did not become idle; logs:" >&2
    tail -n 20 "$dir"/log/*.log "$dir/munge/munged.log" >&2 || true
    exit 1
    ;;
stop)
    end_watcher
    # Cancel what is still queued so no job step outlives the daemons.
    export SLURM_CONF="$dir/slurm.conf"
    ids="$(squeue -h -o %i 2>/dev/null || true)"
    if [ -n "$ids" ]; then
        scancel $ids 2>/dev/null || true
        for _ in $(seq 50); do
            [ -z "$(squeue -h -o %i 2>/dev/null || true)" ] && break
            sleep 0.2
        done
    fi
    # Each pid file goes with its daemon, so a later stop signals no reused pid.
    for p in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
        [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null || true
        rm -f "$p"
    done
    ;;
*)
    echo "usage: $0 start DIR CTLD_PORT SLURMD_PORT [OWNER] | stop DIR" >&2
    exit 2
    ;;
esac
