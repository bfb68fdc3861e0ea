#!/usr/bin/env bash
# Installs the real headless agent CLIs the end-to-end tests drive (against local mock model servers)
# into the project-local prefix .harnesses/ (gitignored). Idempotent: a stamp keyed on the pins skips
# the install when it is already there. Exits non-zero when npm or a version check fails.
#   HARNESS_INSTALL_TIMEOUT  seconds allowed for npm (default 600)
set -euo pipefail
cd "$(dirname "$0")/.."

# The harness pins live in one file the package ships (`crosstalk doctor` reads it too): "<command> <package> <version>".
PIN_FILE=src/crosstalk/doctor/harness_pins.txt
PINS=()
CHECKS=()
while read -r cmd pkg ver rest; do
  case "$cmd" in ''|'#'*) continue ;; esac
  [ -n "$ver" ] && [ -z "$rest" ] || { echo "install_harnesses: bad line in $PIN_FILE: $cmd $pkg $ver $rest" >&2; exit 1; }
  PINS+=("$pkg@$ver")
  CHECKS+=("$cmd $ver")
done < "$PIN_FILE"
[ "${#CHECKS[@]}" -gt 0 ] || { echo "install_harnesses: no pins in $PIN_FILE" >&2; exit 1; }
PINS+=("@anthropic-ai/tokenizer@0.0.4")  # not a harness: Anthropic's tokenizer, to hold the size of what the model reads
PREFIX=.harnesses
BIN="$PREFIX/node_modules/.bin"
STAMP="$PREFIX/.installed"
want="$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -d' ' -f1)"

have_all_bins() {
  local c
  for c in "${CHECKS[@]}"; do [ -x "$BIN/${c%% *}" ] || return 1; done
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && have_all_bins; then
  echo "install_harnesses: up to date in $PREFIX/" >&2
  exit 0
fi

command -v npm >/dev/null 2>&1 || { echo "install_harnesses: npm not found (needs node >= 20.6)" >&2; exit 1; }
mkdir -p "$PREFIX"
rm -f "$STAMP"
# Exact pins: a plain `npm install @anthropic-ai/claude-code` resolves to an older release on node 20.
# The EBADENGINE warning claude-code prints on node 20 is harmless (it ships a native binary); qwen-code declares
# node >= 22 and runs on node 20 with the same warning (docs/dev/qwen-adapter.md).
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
         PI_CODING_AGENT_DIR="$scratch/.pi" PI_OFFLINE=1 DISABLE_AUTOUPDATER=1 QWEN_HOME="$scratch/.qwen" \
         timeout 60 "$BIN/$1" --version 2>&1 </dev/null)" || { echo "install_harnesses: $1 --version failed: $out" >&2; exit 1; }
  case "$out" in
    *"$2"*) ;;
    *) echo "install_harnesses: $1 reports '$out', expected $2" >&2; exit 1 ;;
  esac
}
for c in "${CHECKS[@]}"; do check ${c%% *} "${c#* }"; done
[ -f "$PREFIX/node_modules/@anthropic-ai/tokenizer/package.json" ] || { echo "install_harnesses: @anthropic-ai/tokenizer missing" >&2; exit 1; }

echo "$want" > "$STAMP"
echo "install_harnesses: installed ${PINS[*]} in $PREFIX/" >&2
