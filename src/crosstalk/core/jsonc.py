"""`json.dumps` and `json.loads` with their default arguments, without importing `json`: the same C scanner and
encoder (`_json`) that `json` itself runs, with `json`'s few lines of glue around them written here.

`crosstalk send` has a start-up budget of twice the bare interpreter (docs/performance.md, "Lean send path"), and
`import json` alone costs ~0.9x a bare start: json.decoder, json.scanner and json.encoder compile regular
expressions at import, so `json` brings `re` and with it `enum`, `functools` and `collections`. A send writes two
small frame lines and reads a descriptor and a one-line answer; this module does those with no `re`. Output and
parse results are json's by construction (the same C functions), and tests/unit/core/test_core_jsonc.py holds both
to `json` with hypothesis (round trips, and the same refusals). What `_json` does not cover, or any input it
refuses, goes to `json` itself (imported then), so a refusal's error is `json`'s own, word for word:
- `loads`: bytes in UTF-16/32 or with a BOM, a str with a BOM, and every document that is not valid JSON;
- `dumps`: a value JSON cannot hold (json's TypeError or ValueError), and any interpreter without `_json`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]

_WS = " \t\n\r"  # json.decoder.WHITESPACE


class _Context:
    """What `_json.make_scanner` reads off a JSONDecoder made with the default arguments."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


_scan = _json.make_scanner(_Context()) if _json is not None else None  # type: ignore[arg-type]  # a context, as json passes


def _refuse(o: object) -> Any:
    import json

    return json.JSONEncoder.default(json.JSONEncoder(), o)  # json's TypeError, word for word


def dumps(obj: Any, *, ensure_ascii: bool = True) -> str:
    """`json.dumps(obj, ensure_ascii=ensure_ascii)`."""
    if _json is None:  # pragma: no cover - no _json
        import json

        return json.dumps(obj, ensure_ascii=ensure_ascii)
    quote = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    if isinstance(obj, str):
        return quote(obj)
    # json.encoder.JSONEncoder.iterencode(_one_shot=True) with the default arguments: check_circular (a fresh
    # markers dict per call, as json makes), no indent, separators (', ', ': '), unsorted keys, no skipkeys,
    # allow_nan.
    encode = _json.make_encoder({}, _refuse, quote, None, ": ", ", ", False, False, True)
    return "".join(encode(obj, 0))


def loads(s: str | bytes) -> Any:
    """`json.loads(s)`: json's own error (a ValueError) for anything that is not a JSON document."""
    if _scan is None:  # pragma: no cover - no _json
        import json

        return json.loads(s)
    if isinstance(s, bytes | bytearray):
        # json.detect_encoding: UTF-8 unless a BOM or a NUL in the first bytes says otherwise; decoded as json does.
        if s[:4].count(0) or s[:2] in (b"\xff\xfe", b"\xfe\xff") or s[:3] == b"\xef\xbb\xbf":
            return _json_loads(s)
        text = s.decode("utf-8", "surrogatepass")
    elif isinstance(s, str):
        text = s
    else:
        return _json_loads(s)  # json's TypeError
    if text.startswith("\ufeff"):
        return _json_loads(s)
    idx = len(text) - len(text.lstrip(_WS)) if text[:1] in _WS else 0  # no copy of an unpadded document
    try:
        obj, end = _scan(text, idx)
    except (StopIteration, ValueError):
        return _json_loads(s)
    if end != len(text) and text[end:].strip(_WS):
        return _json_loads(s)  # "Extra data"
    return obj


def _json_loads(s: Any) -> Any:
    import json

    return json.loads(s)
