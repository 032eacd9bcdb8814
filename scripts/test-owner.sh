# Sourced by the test daemons' scripts (test-slurm.sh, test-sshd.sh), which
# set `dir` and take `start … [OWNER]` and `stop DIR`.

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
