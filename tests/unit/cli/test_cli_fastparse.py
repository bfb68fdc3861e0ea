"""`crosstalk send`'s argparse-free parse (cli/fastparse.py) against argparse itself: for any command line it
either gives exactly the namespace argparse's parse_intermixed_args gives, or declines (and argparse parses it, its
help and errors included). It never accepts a line argparse refuses."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.cli.fastparse import Spec, Unsupported, parse_send, send_spec
from crosstalk.cli.parser import send_parser

pytestmark = pytest.mark.unit

SPEC = send_spec()
OPTIONS = sorted(SPEC.options) if SPEC is not None else []
VALUES = ["inform", "user", "meta", "ping", "ask", "command", "auto", "steer", "next_turn", "follow_up", "steering",
          "0", "1", "5", "0.05", "0.1", "600", "601", "86400", "1e9", "-1", "-5", "-1.5", "x", "", " ", "-", "--",
          "-x", "--x", "-h", "--help", "@ci:build", "@cli:me", "hello world", "a=b", "--kind=ask", "--kind=nope",
          "--from=@a:b", "--from=", "--json=1", "--jso", "--ki", "--a2", "-j", "bob", "bob@host", "t -x"]  # fmt: skip
TOKENS = st.one_of(st.sampled_from(OPTIONS), st.sampled_from(VALUES), st.text(max_size=6))


def _argparse(argv: list[str]) -> dict | None:
    """argparse's namespace for `argv`, or None where it refuses it (exits)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            ns = send_parser().parse_intermixed_args(argv)
    except SystemExit:
        return None
    ns.command = "send"
    return vars(ns)


def test_send_is_fully_recorded() -> None:
    assert SPEC is not None, "send's add_arguments uses what the fast parse cannot follow: every send takes argparse"
    assert {a.dest for a in SPEC.options.values()} | {d for d, _ in SPEC.positionals} | {"run"} == set(
        _argparse(["bob"]) or {}
    ) - {"command"}


@settings(max_examples=600, deadline=None)
@given(st.lists(TOKENS, max_size=7))
def test_the_fast_parse_agrees_with_argparse_or_declines(argv: list[str]) -> None:
    fast = parse_send(argv)
    if fast is not None:
        assert vars(fast) == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["bob", "hi"],
        ["bob"],
        ["--json", "bob", "hi", "--kind", "meta"],
        ["bob", "--from", "@ci:x", "hi"],
        ["bob", "-", "--from=@ci:x"],
        ["bob", "hi", "--timeout", "5", "--wait-held", "0", "--delivery", "steer", "--mode", "steer"],
        ["bob", "hi", "--a2a", "--as", "alice", "--task", "t1", "--return-immediately", "--kind", "ask"],
        ["bob", "hi", "--deadline", "30", "--transport", "main"],
        ["bob", ""],
    ],
)
def test_ordinary_lines_take_the_fast_parse(argv: list[str]) -> None:
    fast = parse_send(argv)
    assert fast is not None
    assert vars(fast) == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["-h"],
        ["bob", "--help"],
        ["--", "bob"],
        ["bob", "--jso"],
        ["bob", "hi", "extra"],
        ["bob", "--kind", "nope"],
        ["bob", "--timeout", "0"],
        ["bob", "--json=1"],
        ["bob", "--from"],
        ["bob", "-5"],
        ["bob", "--from", "-x"],
    ],
)
def test_everything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert parse_send(argv) is None


def test_the_recorder_refuses_what_it_cannot_follow() -> None:
    for call in (
        lambda s: s.add_argument("-v", action="store_true"),
        lambda s: s.add_argument("--n", nargs="+"),
        lambda s: s.add_argument("--n", action="count"),
        lambda s: s.add_argument("--n", required=True),
        lambda s: s.add_argument("files", nargs="*"),
        lambda s: s.add_argument("--n", type=int, default="3"),
    ):
        with pytest.raises(Unsupported):
            call(Spec())
