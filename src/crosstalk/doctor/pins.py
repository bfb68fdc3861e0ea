"""The harness versions crosstalk is tested with, read from harness_pins.txt (shipped in the package; the install
script reads the same file, so the pins live in one place)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PIN_FILE = Path(__file__).with_name("harness_pins.txt")


@dataclass(frozen=True, slots=True)
class Pin:
    command: str  # claude, codex, pi
    package: str  # the npm package that provides it
    version: str

    @property
    def install(self) -> str:
        """The command that installs exactly this version."""
        return f"npm install -g {self.package}@{self.version}"


def parse_pins(text: str) -> tuple[Pin, ...]:
    """Pins from the file's text; blank lines and '#' comments are skipped, a malformed line is a ValueError."""
    pins = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"{PIN_FILE.name} line {number}: expected '<command> <package> <version>', got {line!r}")
        pins.append(Pin(*parts))
    return tuple(pins)


def load_pins(path: Path = PIN_FILE) -> tuple[Pin, ...]:
    return parse_pins(path.read_text(encoding="utf-8"))
