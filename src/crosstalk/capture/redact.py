"""Redaction of captured frames: pure functions, no I/O.

A frame that parses as JSON is walked: the value of every field named like a secret (token, key, secret,
authorization, password, credential, cookie, bearer; `{"name": "X-Api-Key", "value": …}` pairs too) becomes
REDACTED, and every string (keys included) goes through the text rules. A frame that is not JSON (a cut-off line,
a plain socket line) goes through the text rules whole. The text rules: `Bearer …`/`Basic …` credentials,
`name=value` and `"name": "value"` pairs whose name looks secret (also JSON-escaped inside a string), `--token X`
options, well-known key shapes (sk-…, ghp_…, xoxb-…, AKIA…, AIza…, glpat-…), and every exact secret the caller
knows (the agent's socket key and bearer token, secret-named environment values).

Numbers, booleans and null under a secret-named field are kept: token counts are worth seeing, and no key is one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from crosstalk.core import untrusted

REDACTED = "[redacted]"
MIN_KNOWN_SECRET = 8  # shorter "secrets" would redact ordinary words
MIN_CUT = 4  # a frame cut short that ends in this much of a known secret loses that end
MAX_DEPTH = 64  # deeper JSON than this is redacted as text
MAX_EMBEDDED = 1024 * 1024  # a JSON document inside a string is walked only up to this size

_SECRET_PARTS = ("token", "secret", "passw", "authoriz", "credential", "cookie", "bearer", "apikey", "privatekey")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# The secret word of a name and the rest of the name (at most 64 characters, taken whole: a possessive match
# never backtracks), so that a long run of letters or of secret words stays linear.
_NAME = r"(?:token|secret|passw(?:or)?d|authori[sz]ation|credential|cookie|bearer|api[_-]?key|key)[\w.-]{0,64}+"
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s{1,8})[A-Za-z0-9._~+/=-]+")
_SEP = r"[\\\"']{0,4}\s{0,8}[:=]\s{0,8}[\\\"']{0,4}"  # `=`, `: `, `": "`, `\":\"` (JSON inside a string)
_VALUE = r"(?!\[redacted\])[^\s\"'\\&,;}\]]+"
_PAIR = re.compile(rf"(?i)({_NAME})({_SEP})({_VALUE})")
_OPTION = re.compile(rf"(?i)(?<=-)({_NAME})(\s{{1,8}})((?!\[redacted\])[^\s\"'\\]+)")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{20,})"
)


def secret_name(name: str) -> bool:
    """Whether a field, header or variable called `name` holds a secret."""
    flat = re.sub(r"[^a-z0-9]", "", name.lower())
    if any(part in flat for part in _SECRET_PARTS) or flat.endswith(("key", "keys")):
        return True
    return any(word.lower() in ("key", "keys") for word in _WORD.findall(name))


class Redactor:
    """Redact frames, replacing `known` secrets wherever they occur as well as everything the rules find."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self.known = sorted({s for s in known if len(s) >= MIN_KNOWN_SECRET}, key=len, reverse=True)

    def frame(self, raw: bytes, *, cut: bool = False) -> tuple[str, Any]:
        """("frame", redacted JSON value) when `raw` is JSON, else ("text", redacted text). `cut`: `raw` is the start
        of a longer frame, so a known secret may end it half-written; that half goes too."""
        text = raw.decode("utf-8", errors="replace")
        if cut:
            text = self._cut_tail(text)
        try:
            value = untrusted.loads(text, what="a captured frame", max_bytes=MAX_EMBEDDED, max_depth=MAX_DEPTH)
        except untrusted.UntrustedInput:  # not JSON, or nested deeper than we walk: redacted as text
            return "text", self.text(text)
        return "frame", self.value(value)

    def _cut_tail(self, text: str) -> str:
        for secret in self.known:
            for n in range(min(len(secret) - 1, len(text)), MIN_CUT - 1, -1):
                if text.endswith(secret[:n]):
                    return text[:-n] + REDACTED
        return text

    def value(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            return self.text(json.dumps(value))
        if isinstance(value, str):
            return self._string(value, depth)
        if isinstance(value, list):
            return [self.value(v, depth + 1) for v in value]
        if isinstance(value, dict):
            return self._object(value, depth)
        return value

    def _object(self, obj: Mapping[str, Any], depth: int) -> dict[str, Any]:
        # {"name": "Authorization", "value": "…"}: a header or variable spelled as a pair.
        label = next((obj[k] for k in ("name", "key", "header") if isinstance(obj.get(k), str)), None)
        pair_secret = label is not None and secret_name(label)
        out: dict[str, Any] = {}
        for key, val in obj.items():
            hidden = secret_name(key) or (pair_secret and key in ("value", "values"))
            if hidden and not (val is None or isinstance(val, bool | int | float)):
                out[self.text(key)] = REDACTED
            else:
                out[self.text(key)] = self.value(val, depth + 1)
        return out

    def _string(self, text: str, depth: int) -> str:
        stripped = text.strip()
        if stripped[:1] in ("{", "[") and len(stripped) <= MAX_EMBEDDED:
            try:
                inner = untrusted.loads(stripped, what="JSON in a string", max_bytes=MAX_EMBEDDED, max_depth=MAX_DEPTH)
            except untrusted.UntrustedInput:
                pass
            else:  # a JSON document carried as a string (a tool result's text): walk it, then say it the same way
                return json.dumps(self.value(inner, depth + 1), ensure_ascii=False, separators=(",", ":"))
        return self.text(text)

    def text(self, text: str) -> str:
        for secret in self.known:
            if secret in text:
                text = text.replace(secret, REDACTED)
        text = _AUTH_SCHEME.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
        text = _PAIR.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
        text = _OPTION.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
        return _KEY_SHAPES.sub(REDACTED, text)


def secret_environment(environ: Mapping[str, str]) -> list[str]:
    """The values of environment variables named like secrets (OPENAI_API_KEY, GH_TOKEN, …)."""
    return [v for k, v in environ.items() if secret_name(k) and len(v) >= MIN_KNOWN_SECRET]
