#!/usr/bin/env bash
# nginx-sse.sh - nginx streaming scripted, timed OpenAI-style SSE on 127.0.0.1 (the test suite's
# second real server: a production HTTP stack's chunked keep-alive framing, not our own code).
#
#   nginx-sse.sh install       apt-get install nginx-light + libnginx-mod-http-echo (Debian; root)
#                              when missing; a no-op otherwise
#   nginx-sse.sh start [PORT]  install if needed, start an instance on 127.0.0.1:PORT (default
#                              8002) in a fresh temporary directory, print on stdout
#                              PID=<master pid> URL=http://127.0.0.1:<PORT> MODEL=nginx-sse
#   nginx-sse.sh stop PID      stop an instance this script started, remove its directory
#
# Routes (POST; the request body is read and ignored):
#   /v1/completions, /v1/chat/completions         vLLM-shaped streams: TOKENS token events (the
#                                                 words of Sonnet 18), a usage chunk
#                                                 (prompt_tokens 10), data: [DONE]
#   /crlf/v1/...                                  the same, events ended by \r\n\r\n
#   /split/v1/...                                 every token event sent as two HTTP chunks,
#                                                 cut inside "data", mid-JSON or in the blank line
#   /error/...                                    500 with an OpenAI error body
#   GET /health                                   200
# Timing: the first event after TTFT seconds, then ITL seconds between token events.
# Environment: NGINX_SSE_TOKENS (16), NGINX_SSE_TTFT (0.05), NGINX_SSE_ITL (0.01);
# VLLM_BENCH_NO_INSTALL=1: `start` fails instead of installing (the tests set it unless CI).
set -euo pipefail

TOKENS=${NGINX_SSE_TOKENS:-16}
TTFT=${NGINX_SSE_TTFT:-0.05}
ITL=${NGINX_SSE_ITL:-0.01}
MODEL=nginx-sse
WORDS=(Shall I compare thee to a summer day Thou art more lovely and more temperate
    Rough winds 'do' shake the darling buds of May And summer lease hath all too short a date)

say() { echo "nginx-sse.sh: $*" >&2; }
fail() { say "error: $*"; exit 1; }

[[ $TOKENS =~ ^[1-9][0-9]*$ ]] || fail "NGINX_SSE_TOKENS must be a whole number >= 1, got '$TOKENS'"
[[ $TTFT =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "NGINX_SSE_TTFT must be seconds (e.g. 0.05), got '$TTFT'"
[[ $ITL =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "NGINX_SSE_ITL must be seconds (e.g. 0.01), got '$ITL'"

nginx_path() { command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true; }
echo_module() {
    local m
    for m in /usr/lib/nginx/modules/ngx_http_echo_module.so /usr/share/nginx/modules/ngx_http_echo_module.so; do
        [ -f "$m" ] && { echo "$m"; return; }
    done
}

install() {
    [ -n "$(nginx_path)" ] && [ -n "$(echo_module)" ] && return 0
    [ "${VLLM_BENCH_NO_INSTALL:-0}" != 1 ] ||
        fail "nginx with its echo module is not installed; run scripts/servers/nginx-sse.sh install (as root)"
    [ "$(id -u)" = 0 ] || fail "nginx with its echo module is missing; as root: apt-get install nginx-light libnginx-mod-http-echo"
    command -v apt-get >/dev/null || fail "no apt-get here: install nginx and its echo module (ngx_http_echo_module) by hand"
    say "installing nginx-light and libnginx-mod-http-echo"
    local opts=(-y -q --no-install-recommends)
    export DEBIAN_FRONTEND=noninteractive
    apt-get install "${opts[@]}" nginx-light libnginx-mod-http-echo >&2 ||
        { apt-get update -q >&2 && apt-get install "${opts[@]}" nginx-light libnginx-mod-http-echo >&2; } ||
        fail "apt-get install nginx-light libnginx-mod-http-echo failed"
    [ -n "$(nginx_path)" ] && [ -n "$(echo_module)" ] || fail "installed, but nginx or its echo module is still missing"
}

# An nginx single-quoted string.
quote() {
    local s=${1//\\/\\\\}
    s=${s//\'/\\\'}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    printf "'%s'" "$s"
}

say_bytes() { printf '            echo -n %s;\n            echo_flush;\n' "$(quote "$1")"; }
pause() { [[ $1 =~ ^0*(\.0*)?$ ]] || printf '            echo_sleep %s;\n' "$1"; }

# One token event of `kind` (cmpl|chat): word and finish reason (null or "length").
event() {
    if [ "$1" = cmpl ]; then
        printf '{"id":"cmpl-nginx-sse","object":"text_completion","created":1700000000,"model":"%s","choices":[{"index":0,"text":" %s","logprobs":null,"finish_reason":%s,"stop_reason":null}],"usage":null}' "$MODEL" "$2" "$3"
    else
        printf '{"id":"chatcmpl-nginx-sse","object":"chat.completion.chunk","created":1700000000,"model":"%s","choices":[{"index":0,"delta":{"content":" %s"},"logprobs":null,"finish_reason":%s}]}' "$MODEL" "$2" "$3"
    fi
}

stream() { # location kind separator split(0|1)
    local kind=$2 sep=$3 split=$4 i data cut
    printf '        location = %s {\n' "$1"
    printf '            if ($request_method != POST) { return 405; }\n'
    printf '            default_type text/event-stream;\n            echo_read_request_body;\n'
    pause "$TTFT"
    [ "$kind" = chat ] &&
        say_bytes "data: {\"id\":\"chatcmpl-nginx-sse\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"$MODEL\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}$sep"
    for ((i = 0; i < TOKENS; i++)); do
        ((i == 0)) || pause "$ITL"
        data="data: $(event "$kind" "${WORDS[i % ${#WORDS[@]}]}" "$( ((i == TOKENS - 1)) && echo '"length"' || echo null)")$sep"
        if [ "$split" = 1 ]; then
            case $((i % 3)) in 0) cut=2 ;; 1) cut=$((${#data} / 2)) ;; *) cut=$((${#data} - ${#sep} / 2)) ;; esac
            say_bytes "${data:0:cut}"
            pause 0.005
            say_bytes "${data:cut}"
        else
            say_bytes "$data"
        fi
    done
    local object=text_completion id=cmpl-nginx-sse
    [ "$kind" = chat ] && { object=chat.completion.chunk; id=chatcmpl-nginx-sse; }
    say_bytes "data: {\"id\":\"$id\",\"object\":\"$object\",\"created\":1700000000,\"model\":\"$MODEL\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"total_tokens\":$((10 + TOKENS)),\"completion_tokens\":$TOKENS}}$sep"
    say_bytes "data: [DONE]$sep"
    printf '        }\n'
}

config() { # dir port
    local dir=$1 port=$2 prefix sep
    cat <<CONF
load_module $(echo_module);
daemon on;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    client_body_buffer_size 1m;
    client_max_body_size 64m;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    tcp_nodelay on;
    server {
        listen 127.0.0.1:$port;
        location = /health { return 200; }
        location /error/ {
            default_type application/json;
            return 500 '{"object":"error","message":"injected error from nginx-sse","type":"InternalServerError","param":null,"code":500}';
        }
CONF
    for prefix in "" /crlf /split; do
        sep=$'\n\n'
        [ "$prefix" = /crlf ] && sep=$'\r\n\r\n'
        stream "$prefix/v1/completions" cmpl "$sep" "$([ "$prefix" = /split ] && echo 1 || echo 0)"
        stream "$prefix/v1/chat/completions" chat "$sep" "$([ "$prefix" = /split ] && echo 1 || echo 0)"
    done
    printf '        location / { return 404; }\n    }\n}\n'
}

health() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/health" || true; }

start() {
    local port=${1:-8002}
    [[ $port =~ ^[0-9]{1,5}$ ]] || fail "port must be a number, got '$port'"
    install
    [ "$(health "$port")" = 000 ] || fail "127.0.0.1:$port is in use; pick another port"
    local dir
    dir=$(mktemp -d "${TMPDIR:-/tmp}/nginx-sse.XXXXXXXX")
    chmod 755 "$dir" # a root master runs its worker as nobody
    config "$dir" "$port" >"$dir/nginx.conf"
    "$(nginx_path)" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" </dev/null >&2 ||
        { cat "$dir/error.log" >&2 || true; rm -rf "$dir"; fail "nginx did not start"; }
    for _ in $(seq 100); do
        [ "$(health "$port")" = 200 ] && [ -s "$dir/nginx.pid" ] && break
        sleep 0.05
    done
    [ "$(health "$port")" = 200 ] || fail "nginx is not answering on 127.0.0.1:$port; see $dir/error.log"
    echo "PID=$(cat "$dir/nginx.pid") URL=http://127.0.0.1:$port MODEL=$MODEL"
}

stop() {
    local pid=${1:-} dir
    [[ $pid =~ ^[0-9]+$ ]] || fail "usage: nginx-sse.sh stop PID"
    [ -r "/proc/$pid/cmdline" ] || return 0
    dir=$(tr '\0' ' ' <"/proc/$pid/cmdline" | sed -nE 's|^nginx: master process .* -p ([^ ]*/nginx-sse\.[A-Za-z0-9]{8})/ .*|\1|p')
    [ -n "$dir" ] || fail "process $pid is not an nginx master started by this script"
    kill -TERM "$pid"
    for _ in $(seq 100); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
    [ -e "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null
    rm -rf "$dir"
}

case ${1:-} in
install) install ;;
start) start "${2:-}" ;;
stop) stop "${2:-}" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
