#!/usr/bin/env bash
# One entry point for a fresh machine: creates .venv, installs crosstalk with its dev extras, then runs
#   demo   the crosstalk demo (real Claude Code, Codex and pi sessions when installed in .harnesses/ or on PATH,
#          else fake-harness agents, exchanging messages over real sockets)
#   test   installs the pinned harness CLIs (scripts/install_harnesses.sh), then ruff, mypy and the whole pytest suite
#          (what CI runs)
#   bench  the benchmarks in bench/ (figures beside same-run baselines)
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "crosstalk needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

setup() {
  if [ ! -x .venv/bin/python ]; then
    "$(pick_python)" -m venv .venv
  fi
  # Reinstall only when the project metadata changed since the last install.
  local stamp=.venv/.crosstalk-installed want
  want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
    echo "$want" > "$stamp"
  fi
  # An editable install leaves src/ without bytecode, and PYTHONDONTWRITEBYTECODE may stop Python writing it:
  # compile it as a wheel install would, so `crosstalk send` starts like an installed command.
  .venv/bin/python -m compileall -q src >/dev/null
}

cmd="${1:-}"
case "$cmd" in
  demo)  setup
         # Real sessions need the pinned harness CLIs: installed here, into .harnesses/, by the same installer and
         # pins as the tests (once; later runs find them). Without node and npm the demo runs crosstalk's fake
         # agents, and says so and what would give real sessions.
         if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
           if [ ! -f .harnesses/.installed ]; then
             echo "dev.sh: installing the pinned harness CLIs into .harnesses/ for real sessions (once; about a minute)" >&2
           fi
           if ! bash scripts/install_harnesses.sh; then
             echo "dev.sh: installing the harness CLIs failed (above): the demo runs fake agents instead" >&2
           fi
         else
           echo "dev.sh: no node and npm here: the demo runs crosstalk's fake agents, not real sessions;" \
                "for real Claude Code, Codex, pi and Qwen Code sessions install node >= 20 with npm, then run" \
                "bash scripts/dev.sh demo again" >&2
         fi
         if [ -x .harnesses/node_modules/.bin/claude ]; then
           exec .venv/bin/crosstalk demo --harness-bin "$PWD/.harnesses/node_modules/.bin"
         fi
         exec .venv/bin/crosstalk demo ;;
  test)  setup; shift
         # The real harness CLIs for tests/e2e (pinned, in .harnesses/). They must install and the e2e tests must
         # run (CROSSTALK_E2E_REQUIRED=1 turns a skip into a failure), so a green run never hides a missing install.
         # CROSSTALK_SKIP_E2E=1 is the explicit way to test without them (no node/npm, offline).
         export CROSSTALK_E2E_BIN="$PWD/.harnesses/node_modules/.bin"
         if [ "${CROSSTALK_SKIP_E2E:-}" = 1 ]; then
           echo "dev.sh: CROSSTALK_SKIP_E2E=1: the e2e tests will be skipped" >&2
         elif bash scripts/install_harnesses.sh; then
           export CROSSTALK_E2E_REQUIRED=1
         else
           echo "dev.sh: installing the harness CLIs failed (set CROSSTALK_SKIP_E2E=1 to test without them)" >&2
           exit 1
         fi
         .venv/bin/ruff check src tests bench
         .venv/bin/mypy  # the type check; its settings (strict for core, policy, receiver, journal) are in pyproject.toml
         exec .venv/bin/python -m pytest "$@" ;;
  bench) setup; exec .venv/bin/python bench/run_all.py ;;
  *) echo "usage: scripts/dev.sh demo|test|bench" >&2; exit 2 ;;
esac
