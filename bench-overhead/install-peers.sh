#!/usr/bin/env bash
# Installs the peer clients bench-overhead/run.sh compares vllm-bench against, into
# bench-overhead/peers/ (git-ignored). Each peer is optional: what cannot be installed is
# reported and run.sh skips it.
#
#   vllm-rs  the upstream Rust port (`vllm-rs bench serve`), shipped inside the vllm wheel;
#            fetched with `pip download vllm==$VLLM_VERSION --no-deps` and unzipped.
#   python   Python `vllm bench serve`: only with --python (a full vllm install is several GB),
#            into a virtualenv at peers/venv.
#   aiperf   NVIDIA AIPerf $AIPERF_VERSION (`aiperf profile`): only with --aiperf,
#   guidellm GuideLLM $GUIDELLM_VERSION (`guidellm run`): only with --guidellm; both from PyPI
#            into one virtualenv at peers/peer-venv (6.5 GB with both: GuideLLM pulls torch).
#
# Usage: install-peers.sh [--python] [--aiperf] [--guidellm] [--vllm-version X.Y.Z]
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
peers="$here/peers"
version="${VLLM_VERSION:-0.33.0}"
aiperf_version="${AIPERF_VERSION:-0.13.0}"
guidellm_version="${GUIDELLM_VERSION:-0.8.1}"
want_python=0
want_aiperf=0
want_guidellm=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --python) want_python=1 ;;
        --aiperf) want_aiperf=1 ;;
        --guidellm) want_guidellm=1 ;;
        --vllm-version) version="$2"; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "install-peers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$peers/wheel"

install_vllm_rs() {
    if ! command -v pip >/dev/null; then
        echo "vllm-rs: skipped (pip not found; install Python's pip to fetch the vllm wheel)"
        return
    fi
    local wheel
    wheel="$(ls "$peers"/wheel/vllm-"$version"-*.whl 2>/dev/null | head -n1 || true)"
    if [[ -z "$wheel" ]]; then
        echo "vllm-rs: downloading the vllm $version wheel (no dependencies) ..."
        if ! pip download --quiet --no-deps --only-binary=:all: "vllm==$version" -d "$peers/wheel"; then
            echo "vllm-rs: skipped (pip download vllm==$version failed; see the message above)"
            return
        fi
        wheel="$(ls "$peers"/wheel/vllm-"$version"-*.whl | head -n1)"
    fi
    # A wheel is a zip; list it first so a wheel without the binary is reported, not guessed.
    local member
    member="$(python3 - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
hits = [n for n in names if n.rstrip("/").split("/")[-1] in ("vllm-rs", "vllm_rs")]
print(hits[0] if hits else "")
PY
)"
    if [[ -z "$member" ]]; then
        echo "vllm-rs: skipped (the wheel $(basename "$wheel") has no vllm-rs binary)"
        return
    fi
    python3 - "$wheel" "$member" "$peers/vllm-rs" <<'PY'
import sys, zipfile, shutil, os
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[3], 0o755)
PY
    echo "vllm-rs: installed $peers/vllm-rs (from $member in $(basename "$wheel"))"
}

install_python() {
    if [[ "$want_python" != 1 ]]; then
        echo "python: skipped (pass --python to install vllm $version into $peers/venv; several GB)"
        return
    fi
    python3 -m venv "$peers/venv"
    "$peers/venv/bin/pip" install --quiet "vllm==$version"
    echo "python: installed $peers/venv/bin/vllm"
}

# AIPerf and GuideLLM share one virtualenv (they pin compatible versions of their common
# dependencies); a peer already at its pinned version is left as it is.
install_pip_peer() { # name pypi-name version wanted
    local name="$1" dist="$2" want="$3" wanted="$4" venv="$peers/peer-venv"
    if [[ "$wanted" != 1 ]]; then
        echo "$name: skipped (pass --$name to install $dist $want into $venv)"
        return
    fi
    if [[ -x "$venv/bin/$name" ]] && [[ "$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$dist'))" 2>/dev/null)" == "$want" ]]; then
        echo "$name: $dist $want already installed in $venv"
        return
    fi
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    if ! "$venv/bin/pip" install --quiet "$dist==$want"; then
        echo "$name: skipped (pip install $dist==$want failed; see the message above)"
        return
    fi
    echo "$name: installed $venv/bin/$name ($dist $want)"
}

install_vllm_rs
install_python
install_pip_peer aiperf aiperf "$aiperf_version" "$want_aiperf"
install_pip_peer guidellm guidellm "$guidellm_version" "$want_guidellm"
