"""`crosstalk relay join` refuses what it can judge without a relay: one clear line, exit 2, nothing saved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crosstalk.cli.main import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    err = capsys.readouterr().err
    return int(ended.value.code or 0), err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CROSSTALK_HOME", str(tmp_path / "state"))
    return tmp_path


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("nats://relay.example:4222", "must use TLS"),
        ("nats://u:p@127.0.0.1:4222", "carries credentials"),
        ("http://127.0.0.1:4222", "scheme must be one of"),
    ],
)
def test_join_refuses_a_url(home: Path, capsys: pytest.CaptureFixture[str], url: str, says: str) -> None:
    code, err = _run(["relay", "join", url, "--alias", "laptop"], capsys)
    assert code == 2
    assert err.startswith("crosstalk: ") and says in err and err.count("\n") == 1
    assert not (home / "state" / "relay" / "relay.json").exists()


def test_join_refuses_a_readable_credentials_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    creds = home / "m.creds"
    creds.write_text("user=laptop\npassword=x\n")
    os.chmod(creds, 0o644)
    code, err = _run(["relay", "join", "nats://127.0.0.1:4222", "--alias", "laptop", "--creds", str(creds)], capsys)
    assert code == 2 and "mode 0644: others could read it; run chmod 600" in err
    assert not (home / "state" / "relay" / "relay.json").exists()


def test_join_refuses_a_bad_alias(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["relay", "join", "nats://127.0.0.1:4222", "--alias", "lap.top"], capsys)
    assert code == 2 and "1-64 letters" in err


def test_serve_and_status_before_a_join(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["relay", "serve"], capsys)
    assert code == 2 and "joined no relay" in err
    with pytest.raises(SystemExit) as ended:
        main(["relay", "status", "--json"])
    assert not ended.value.code
    assert capsys.readouterr().out.strip() == '{"joined": false, "serve": null}'
