# tmux-mock.sh - sourced by the scripts that run vllm-bench in a tmux terminal against the
# mock (dashboard-overhead.sh, dashboard-thread-cpu.sh): the checks of what they need, a work
# directory, a tmux socket and a port of their own, the mock started and waited for, and all
# of it removed on exit.
#
#   need SCRIPT BIN HOW TOOL...   exits 2 naming what is missing (HOW: how to build BIN)
#   setup NAME                    sets work, sock, port; removes them (and the mock) on exit
#   start_mock COMMAND...         starts the mock (its flags include --port "$port"), waits

need() {
    local script="$1" bin="$2" how="$3"
    shift 3
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$script: $tool is required" >&2; exit 2; }
    done
    for b in vllm-bench mock-llm-server; do
        [[ -x "$bin/$b" ]] || { echo "$script: $bin/$b missing ($how)" >&2; exit 2; }
    done
}

setup() {
    work="$(mktemp -d)"
    sock="$1-$$"
    port=$((20000 + $$ % 20000))
    trap cleanup EXIT
}

cleanup() {
    tmux -L "$sock" kill-server 2>/dev/null || true
    [[ -n "${mock:-}" ]] && kill "$mock" 2>/dev/null || true
    rm -rf "$work"
}

start_mock() {
    "$@" >/dev/null 2>&1 &
    mock=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.1
    done
}
