"""`install` and `uninstall` offer exactly the harnesses a user can set up, and each says what it does."""

from __future__ import annotations

import pytest

from crosstalk import harness as kinds
from crosstalk.cli.parser import build_parser


def test_install_offers_only_installable_harnesses():
    assert "fake" not in kinds.installable()
    assert set(kinds.installable()) == {n for n in kinds.names() if n != "fake"}


@pytest.mark.parametrize(("verb", "says"), [("install", "The harness to set up."), ("uninstall", "remove crosstalk")])
def test_help_names_what_the_verb_does(verb: str, says: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        build_parser().parse_args([verb, "--help"])
    out = capsys.readouterr().out
    assert says in out and "fake" not in out


def test_fake_is_refused_naming_the_choices(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["install", "fake"])
    assert exc.value.code == 2 and "invalid choice: 'fake'" in capsys.readouterr().err
