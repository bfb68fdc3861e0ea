"""The CLI test here drives real `crosstalk agent run` processes with the CLI tests' process helper
(tests/integration/cli/xt_procs.py), imported by name."""

from __future__ import annotations

import sys
from pathlib import Path

_CLI = str(Path(__file__).resolve().parents[1] / "cli")
if _CLI not in sys.path:
    sys.path.append(_CLI)
