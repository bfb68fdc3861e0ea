"""The A2A integration tests share the in-memory TaskApi of the unit tests (tests/unit/a2a/a2a_fake_tasks.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_UNIT_A2A = str(Path(__file__).resolve().parents[2] / "unit" / "a2a")
if _UNIT_A2A not in sys.path:
    sys.path.insert(0, _UNIT_A2A)
