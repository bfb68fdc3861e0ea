"""One rule for JSON and YAML that someone else wrote (a socket frame, an HTTP body, a file in the state root, git
content, a model's answer): bounded in size and in depth before anything uses it, and any violation is one
`UntrustedInput` naming the input, never a RecursionError, a crash or a wedged loop.

Depth is checked on the raw text before parsing (CPython's parsers recurse, and so does every walk over the result),
so a few kilobytes nesting a thousand levels cost a linear scan and a clear error.
"""

from __future__ import annotations

from crosstalk.core import jsonc
from crosstalk.core.errors import (
    UntrustedInput as UntrustedInput,  # the error of this rule, raised and caught by its name here
)

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64  # deeper than any record crosstalk writes or reads from a harness
MAX_NODES = 1_000_000  # values in one parsed document (YAML aliases can repeat a subtree)


def json_depth(raw: bytes) -> int:
    """How deeply `raw` nests arrays and objects (brackets inside strings do not count). Linear in its size."""
    if b"[" not in raw and b"{" not in raw:
        return 0
    # `re` here, not at the top: only a document with more brackets than MAX_DEPTH is scanned, and `crosstalk send`
    # (which reads a descriptor and a one-line answer) stays without it (docs/performance.md, "Lean send path").
    import re

    depth = deepest = 0
    strings = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
    for match in re.finditer(rb"[\[\]{}]", strings.sub(b"", raw)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def loads(raw: str | bytes, *, what: str, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """`raw` parsed as JSON, or UntrustedInput when it is over `max_bytes`, nests deeper than `max_depth`, or is not
    JSON. Strings may hold lone surrogates (JSON allows `\\ud800`): see `text`."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > max_bytes:
        raise UntrustedInput(what, f"larger than {max_bytes} bytes ({len(data)})")
    # Depth never exceeds the count of opening brackets: most documents (a journal line holds a handful) skip the
    # scan, which costs more than the parse itself.
    if data.count(b"[") + data.count(b"{") > max_depth and json_depth(data) > max_depth:
        raise UntrustedInput(what, f"nested deeper than {max_depth} levels")
    try:
        return jsonc.loads(data)  # json.loads, without importing json (core/jsonc.py)
    except RecursionError:
        raise UntrustedInput(what, f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise UntrustedInput(what, f"not valid JSON ({exc})") from None


def check_depth(value: Any, *, what: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """`value` (already parsed, e.g. by a YAML loader) unchanged, or UntrustedInput when it nests deeper than
    `max_depth` or holds more than `max_nodes` values. Iterative: a deep value cannot overflow the stack here."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise UntrustedInput(what, f"more than {max_nodes} values")
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > max_depth:
            raise UntrustedInput(what, f"nested deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)
    return value


def text(value: str, *, what: str) -> str:
    """`value` when it is text that can be written out (UTF-8), else UntrustedInput: a lone surrogate (`\\ud800`,
    legal in JSON) would fail on the first write, far from where it came in."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UntrustedInput(what, f"not valid Unicode text (a lone surrogate at position {exc.start})") from None
    return value
