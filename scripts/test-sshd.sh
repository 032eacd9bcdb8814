#!/usr/bin/env bash
# A throw-away sshd on 127.0.0.1 for the SSH launcher tests.
#   scripts/test-sshd.sh start DIR PORT [OWNER]
#       host and client keys, config, log and pid file all in DIR; returns once
#       it listens; with OWNER (a pid), it is stopped as soon as that process is gone
#   scripts/test-sshd.sh stop DIR
#       stops it by the pid in DIR/sshd.pid
# Needs openssh-server and openssh-client (scripts/setup-test-env.sh installs them).
set -euo pipefail
cmd="$1" dir="$2"

# watch_owner OWNER and end_watcher.
source "$(dirname "$(readlink -f "$0")")/test-owner.sh"
case "$cmd" in
start)
    port="$3"
    mkdir -p "$dir" /run/sshd
    ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
    ssh-keygen -q -t ed25519 -N '' -f "$dir/client_key"
    cp "$dir/client_key.pub" "$dir/authorized_keys"
    cat >"$dir/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
MaxStartups 100
MaxSessions 100
CONF
    /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
    watch_owner "${4:-}"
    for _ in $(seq 100); do
        [ -s "$dir/sshd.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && exit 0
        sleep 0.1
    done
    echo "sshd did not start; log:" >&2
    cat "$dir/sshd.log" >&2
    exit 1
    ;;
stop)
    end_watcher
    [ -s "$dir/sshd.pid" ] && kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true
    rm -f "$dir/sshd.pid"
    ;;
*)
    echo "usage: $0 start DIR PORT [OWNER] | stop DIR" >&2
    exit 2
    ;;
esac
