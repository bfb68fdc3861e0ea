"""Redaction of captured frames: random secrets placed in every shape a frame carries one in never come out, and
what is not secret comes out unchanged."""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.capture.redact import REDACTED, Redactor, secret_environment, secret_name
from crosstalk.capture.request import MAX_FRAME_BYTES

TOKENISH = string.ascii_letters + string.digits + "-_.~+/="
# Field names a secret travels under, as each convention spells them.
NAMES = [
    "token", "TOKEN", "Token", "access_token", "accessToken", "X-Access-Token", "refresh_token", "id_token",
    "auth_token", "bearer", "Bearer", "key", "Key", "keys", "apiKey", "api_key", "API_KEY", "x-api-key", "X-API-Key",
    "privateKey", "private_key", "signingKey", "sessionKey", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "secret",
    "client_secret", "clientSecret", "AWS_SECRET_ACCESS_KEY", "authorization", "Authorization", "proxy-authorization",
    "password", "Password", "passwd", "credentials", "credential", "cookie", "Set-Cookie", "GH_TOKEN",
]  # fmt: skip
# Every string a redacted frame of the shapes below is made of, so a secret that happens to be one is skipped.
FIXED = " ".join([*NAMES, REDACTED, "jsonrpc 2.0 params arguments headers name value env text result content type "
                  "auth user hello bye done Authorization: Bearer Basic curl -H X-Token: use now https://x/?"
                  "access_token= &page=2 --api-key --token {} [] \" : , true false null 12 3"])  # fmt: skip

names = st.sampled_from(NAMES)
tokens = st.text(alphabet=TOKENISH, min_size=16, max_size=64).filter(lambda s: s not in FIXED)
anything = st.text(min_size=12, max_size=64).filter(lambda s: s.strip() and s not in FIXED and REDACTED not in s)


def _escaped(s: str) -> str:
    return json.dumps(s)[1:-1]


# A secret under a field named like one: any text at all.
FIELD_SHAPES: list[Callable[[str, str], Any]] = [
    lambda n, s: {n: s},
    lambda n, s: {"jsonrpc": "2.0", "params": {"arguments": {n: s, "text": "hello"}}},
    lambda n, s: [{"auth": {n: s}}, {"type": "user"}],
    lambda n, s: {"headers": [{"name": n, "value": s}]},
    lambda n, s: {"env": {n: s}, "text": "done"},
    lambda n, s: {n: {"value": s, "type": "user"}},
    lambda n, s: {n: [s, s]},
    lambda n, s: {"result": {"content": [{"type": "text", "text": json.dumps({n: s})}]}},  # JSON inside a string
    lambda n, s: {"type": "auth", "token": s},  # the socket's auth line, whatever n is
]
# A secret as a token-shaped string in free text (a log line, a message, a command line, a cut-off frame).
TEXT_SHAPES: list[Callable[[str, str], str]] = [
    lambda n, s: f"Authorization: Bearer {s}",
    lambda n, s: f"curl -H 'Authorization: Basic {s}' https://x/",
    lambda n, s: f"use {n}={s} now",
    lambda n, s: f"https://x/?access_token={s}&page=2",
    lambda n, s: f"--api-key {s}",
    lambda n, s: f"--token={s}",
    lambda n, s: f'{{"{n}": "{s}", "text": "hel',  # a frame cut short: not JSON any more
    lambda n, s: f'{{"text":"{_escaped(json.dumps({n: s}))}',  # escaped JSON inside a cut frame
    lambda n, s: f"{n}: {s}",
]


def _out(redactor: Redactor, raw: bytes) -> str:
    kind, value = redactor.frame(raw)
    return value if kind == "text" else json.dumps(value, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(shape=st.sampled_from(FIELD_SHAPES), name=names, secret=anything)
def test_a_secret_under_a_secret_named_field_never_comes_out(shape, name, secret):
    frame = json.dumps(shape(name, secret), ensure_ascii=False).encode()
    out = _out(Redactor(), frame)
    assert secret not in out and _escaped(secret) not in out
    assert REDACTED in out
    json.loads(out)  # still one JSON document


@settings(max_examples=300, deadline=None)
@given(shape=st.sampled_from(TEXT_SHAPES), name=names, secret=tokens)
def test_a_token_in_free_text_never_comes_out(shape, name, secret):
    text = shape(name, secret)
    for frame in (text.encode(), json.dumps({"text": text}).encode()):  # a bare line, and a string in a frame
        out = _out(Redactor(), frame)
        assert secret not in out and REDACTED in out


@settings(max_examples=200, deadline=None)
@given(secret=anything, where=st.sampled_from(["text", "content", "detail", "x"]), before=st.text(max_size=20))
def test_a_known_secret_never_comes_out_wherever_it_is(secret, where, before):
    """The agent's socket key or bearer token, in a field no rule would call secret."""
    frame = {where: before + secret + " bye", "nested": [{"a": secret}], secret: 1}
    out = _out(Redactor([secret]), json.dumps(frame, ensure_ascii=False).encode())
    assert secret not in out and _escaped(secret) not in out


@settings(max_examples=100, deadline=None)
@given(body=st.text(alphabet=string.ascii_letters + string.digits, min_size=24, max_size=48))
def test_well_known_key_shapes_are_redacted_in_any_field(body):
    for key in (f"sk-{body}", f"sk-ant-{body}", f"ghp_{body}", f"github_pat_{body}", f"xoxb-{body}",
                f"glpat-{body}", "AKIA" + body.upper()[:16].ljust(16, "A"), f"AIza{body}{body}"):  # fmt: skip
        out = _out(Redactor(), json.dumps({"text": f"my key is {key}."}).encode())
        assert key not in out, key


def test_what_is_not_secret_is_kept_as_it_was():
    frame = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "send_message", "arguments": {"to": "bob", "text": "hello bob"}, "_meta": {"k": 1}},
        "usage": {"input_tokens": 120, "output_tokens": 7},  # counts under secret-like names are kept
        "token": None,
    }
    kind, value = Redactor().frame(json.dumps(frame).encode())
    assert kind == "frame" and value == frame
    assert Redactor().frame(b"plain line, nothing secret") == ("text", "plain line, nothing secret")


def test_deep_and_odd_frames_are_still_redacted():
    deep: Any = {"token": "deepsecretvalue123"}
    for _ in range(100):
        deep = {"x": deep}
    out = _out(Redactor(), json.dumps(deep).encode())
    assert "deepsecretvalue123" not in out
    assert _out(Redactor(), b"\xff\xfe token=abcdefgh12345678") == "\ufffd\ufffd token=" + REDACTED


@pytest.mark.parametrize("name", ["token", "apiKey", "X-Api-Key", "OPENAI_API_KEY", "client_secret", "sessionKey"])
def test_secret_names(name):
    assert secret_name(name)


@pytest.mark.parametrize("name", ["text", "name", "message_id", "content", "kind", "keyboard", "monkeys_paw", "to"])
def test_ordinary_names(name):
    assert not secret_name(name)


def test_secret_environment_values():
    env = {"OPENAI_API_KEY": "sk-live-1234567890", "GH_TOKEN": "short", "PATH": "/usr/bin:/bin", "HOME": "/root"}
    assert secret_environment(env) == ["sk-live-1234567890"]


def test_a_frame_cut_inside_a_known_secret_loses_that_half():
    key = "6514207f6de090e4fc29855d339deb48"
    for half in (key[:4], key[:12], key[:-1]):
        kind, out = Redactor([key]).frame(('{"text": "' + "x" * 10 + half).encode(), cut=True)
        assert kind == "text" and half not in out and out.endswith(REDACTED)
    assert Redactor([key]).frame(b'{"text": "xxx651', cut=True)[1] == '{"text": "xxx651'  # under four: kept


@pytest.mark.parametrize("unit", ["y", "key", "token ", "sk-", "-", "--key", "key:", "bearer ", " ", "\\", "{", "a=b&"])
def test_long_runs_are_redacted_in_one_linear_pass(unit):
    """A rule that backtracks would take minutes on these (pytest's timeout catches it)."""
    text = unit * (MAX_FRAME_BYTES // len(unit))
    kind, out = Redactor(["abcdefghijkl"]).frame(text.encode())
    assert kind == "text" and len(out) <= 4 * len(text)
