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

# With OWNER, a detached watcher runs `stop` once process OWNER is gone, so
# a test run killed by any signal (its guards never dropped) leaves nothing.
watch_owner() {
    local owner="$1"
    [ -n "$owner" ] || return 0
    # Its own session, so a signal to the test run's process group spares it.
    setsid bash -c 'echo $$ >"$3/watcher.pid"; while kill -0 "$1" 2>/dev/null; do sleep 0.5; done; exec "$2" stop "$3"' \
        watcher "$owner" "$(readlink -f "$0")" "$dir" </dev/null >/dev/null 2>&1 &
    # Known before returning, so a `stop` right after ends it.
    for _ in $(seq 50); do
        [ -s "$dir/watcher.pid" ] && return 0
        sleep 0.1
    done
}

# Ends the watcher unless this is the watcher itself stopping (it execs `stop`).
end_watcher() {
    local w
    w="$(cat "$dir/watcher.pid" 2>/dev/null || true)"
    [ -n "$w" ] && [ "$w" != "$$" ] && kill "$w" 2>/dev/null || true
}
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
