#!/usr/bin/env bash
# Installs the real headless agent CLIs the end-to-end tests drive (against local mock model servers)
# into the project-local prefix .harnesses/ (gitignored). Idempotent: a stamp keyed on the pins skips
# the install when it is already there. Exits non-zero when npm or a version check fails.
#   HARNESS_INSTALL_TIMEOUT  seconds allowed for npm (default 600)
set -euo pipefail
cd "$(dirname "$0")/.."

PINS=(
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.171.0"
  "@mariozechner/pi-coding-agent@0.73.1"
  "@anthropic-ai/tokenizer@0.0.4"  # not a harness: Anthropic's tokenizer, to hold the size of what the model reads
)
PREFIX=.harnesses
BIN="$PREFIX/node_modules/.bin"
STAMP="$PREFIX/.installed"
want="$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -d' ' -f1)"

have_all_bins() {
  local b
  for b in claude codex pi; do [ -x "$BIN/$b" ] || return 1; done
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && have_all_bins; then
  echo "install_harnesses: up to date in $PREFIX/" >&2
  exit 0
fi

command -v npm >/dev/null 2>&1 || { echo "install_harnesses: npm not found (needs node >= 20.6)" >&2; exit 1; }
mkdir -p "$PREFIX"
rm -f "$STAMP"
# Exact pins: a plain `npm install @anthropic-ai/claude-code` resolves to an older release on node 20.
# The EBADENGINE warning claude-code prints on node 20 is harmless (it ships a native binary).
echo "install_harnesses: npm install into $PREFIX/ ..." >&2
timeout "${HARNESS_INSTALL_TIMEOUT:-600}" \
  npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error "${PINS[@]}" >&2

# Check that what got installed is what was pinned, and that each CLI starts (in a throwaway HOME:
# even `codex --version` writes under ~/.codex).
scratch="$(mktemp -d /tmp/xtinst.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
check() {  # check BIN EXPECTED_VERSION
  local out
  out="$(HOME="$scratch" CODEX_HOME="$scratch/.codex" CLAUDE_CONFIG_DIR="$scratch/.claude" \
         PI_CODING_AGENT_DIR="$scratch/.pi" PI_OFFLINE=1 DISABLE_AUTOUPDATER=1 \
         timeout 60 "$BIN/$1" --version 2>&1 </dev/null)" || { echo "install_harnesses: $1 --version failed: $out" >&2; exit 1; }
  case "$out" in
    *"$2"*) ;;
    *) echo "install_harnesses: $1 reports '$out', expected $2" >&2; exit 1 ;;
  esac
}
check claude 2.1.332
check codex 0.171.0
check pi 0.73.1
[ -f "$PREFIX/node_modules/@anthropic-ai/tokenizer/package.json" ] || { echo "install_harnesses: @anthropic-ai/tokenizer missing" >&2; exit 1; }

echo "$want" > "$STAMP"
echo "install_harnesses: installed ${PINS[*]} in $PREFIX/" >&2
