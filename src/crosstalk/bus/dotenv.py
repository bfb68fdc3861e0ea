"""The dotenv reader behind a provider's `env_file:` (the protocol's auth rules, nothing more).

Rules: one `KEY=value` per line; lines whose first non-blank character is `#` are comments; blank lines are
ignored; the value is everything after the first `=`, taken literally — no quotes, no escapes, no `${...}`
expansion, and a `#` inside a value is part of it. Anything else is refused with the file and line number, because a
silently skipped line would surface much later as a confusing auth failure of the model CLI.
"""

from __future__ import annotations

import re
from pathlib import Path

from crosstalk.bus.errors import ModelError

# The keys a process environment can carry portably; also keeps typos like "KEY VALUE" out.
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_dotenv(text: str, *, where: str = "dotenv") -> dict[str, str]:
    """Parse dotenv text; `where` names the file in errors. Later duplicates of a key win, as in a shell."""
    values: dict[str, str] = {}
    # Split on "\n" only: str.splitlines() would also break on \x0b, \x1c, \u2028... which may sit inside a value.
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw  # tolerate CRLF files
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep:
            raise ModelError(f"{where} line {number}: expected KEY=value")
        if not ENV_KEY_RE.fullmatch(key):
            raise ModelError(f"{where} line {number}: {key!r} is not a valid variable name")
        if "\x00" in value:
            # execve cannot carry a NUL; failing here names the line instead of failing at spawn.
            raise ModelError(f"{where} line {number}: the value of {key} contains a NUL character")
        values[key] = value
    return values


def read_dotenv(path: Path, *, display: str | None = None) -> dict[str, str]:
    """Read and parse a dotenv file; `display` is the name used in errors (default: the path)."""
    where = display or str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ModelError(f"{where} is missing") from None
    except OSError as exc:
        raise ModelError(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ModelError(f"{where} line {line}: not valid UTF-8") from None
    if text.startswith("\ufeff"):
        text = text[1:]  # editors on some systems write a BOM; it is not part of the first key
    return parse_dotenv(text, where=where)
