"""`crosstalk relay join`'s checks: the URL (TLS beyond loopback, no credentials in it), the alias, the credentials
file (0600, this user's, a regular file, one of the known forms), and the saved join."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crosstalk.registry.paths import StatePaths
from crosstalk.relay.config import (
    Credentials,
    RelayConfig,
    RelayConfigError,
    check_alias,
    check_url,
    config_path,
    default_alias,
    joined,
    load,
    parse_credentials,
    read_credentials,
    remove,
    save,
)


@pytest.mark.parametrize(
    "url",
    ["nats://127.0.0.1:4222", "nats://localhost:4222", "nats://[::1]:4222", "nats://127.9.9.9", "tls://relay.example:4222",
     "wss://relay.example/nats", "tls://10.0.0.5:4222"],
)  # fmt: skip
def test_loopback_or_tls_urls_are_taken(url: str) -> None:
    assert check_url(url) == url


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("nats://relay.example:4222", "must use TLS: tls://relay.example:4222"),
        ("nats://10.0.0.5:4222", "must use TLS"),
        ("ws://relay.example/nats", "must use TLS"),
        ("http://127.0.0.1:4222", "scheme must be one of"),
        ("127.0.0.1:4222", "scheme must be one of"),
        ("nats://bob:secret@127.0.0.1:4222", "carries credentials; put them in a file"),
        ("nats://tok@127.0.0.1:4222", "carries credentials"),
        ("nats://:4222", "names no host"),
        ("nats://127.0.0.1:99999", "127.0.0.1:99999"),
    ],
)
def test_bad_urls_are_refused_with_the_fix(url: str, says: str) -> None:
    with pytest.raises(RelayConfigError) as err:
        check_url(url)
    assert says in str(err.value)


@pytest.mark.parametrize("alias", ["laptop", "gpu-2", "build_box", "A" * 64])
def test_aliases_that_are_one_subject_token(alias: str) -> None:
    assert check_alias(alias) == alias


@pytest.mark.parametrize("alias", ["", "a.b", "a*", "a>", "with space", "A" * 65, "al@ias"])
def test_aliases_that_would_break_a_subject_are_refused(alias: str) -> None:
    with pytest.raises(RelayConfigError, match="1-64 letters"):
        check_alias(alias)


def test_default_alias_is_the_env_or_the_host_made_safe() -> None:
    assert default_alias({"CROSSTALK_ALIAS": "my box.lan"}) == "my-box-lan"
    check_alias(default_alias({}))


def _creds(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "machine.creds"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_user_password_file(tmp_path: Path) -> None:
    creds = read_credentials(_creds(tmp_path, "# laptop\nuser=laptop\npassword=s3cret=x\n"))
    assert creds == Credentials(user="laptop", password="s3cret=x")
    assert creds.connect_options() == {"user": "laptop", "password": "s3cret=x"}


def test_token_file(tmp_path: Path) -> None:
    assert read_credentials(_creds(tmp_path, "token=abc\n")).connect_options() == {"token": "abc"}


def test_nats_creds_file_and_nkey_seed(tmp_path: Path) -> None:
    path = _creds(tmp_path, "-----BEGIN NATS USER JWT-----\neyJ0\n------END NATS USER JWT------\n")
    assert read_credentials(path).connect_options() == {"user_credentials": str(path)}
    assert parse_credentials("SUAB12\n", "x").connect_options() == {"nkeys_seed_str": "SUAB12"}


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
def test_a_credentials_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = _creds(tmp_path, "token=abc\n", mode)
    with pytest.raises(RelayConfigError, match=f"mode {mode:04o}: others could read it; run chmod 600"):
        read_credentials(path)


def test_a_symlinked_or_missing_credentials_file_is_refused(tmp_path: Path) -> None:
    real = _creds(tmp_path, "token=abc\n")
    link = tmp_path / "link.creds"
    link.symlink_to(real)
    with pytest.raises(RelayConfigError, match="not a regular file"):
        read_credentials(link)
    with pytest.raises(RelayConfigError, match="does not exist"):
        read_credentials(tmp_path / "nope")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "holds no credentials"),
        ("password=x\n", "holds no credentials"),
        ("token=a\nuser=b\n", "not both"),
        ("hello\n", "is not user=, password= or token="),
        ("secret=x\n", "is not user="),
    ],
)
def test_unreadable_credentials_say_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(RelayConfigError, match=says):
        read_credentials(_creds(tmp_path, text))


def test_save_load_remove_round_trip(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    assert load(paths) is None and not joined(paths)
    config = RelayConfig("nats://127.0.0.1:4222", "laptop", "/x/machine.creds")
    save(paths, config)
    assert joined(paths) and load(paths) == config
    assert (config_path(paths).stat().st_mode & 0o777) == 0o600
    assert (config_path(paths).parent.stat().st_mode & 0o777) == 0o700
    assert remove(paths) and not remove(paths) and load(paths) is None


def test_a_damaged_join_says_how_to_recover(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    save(paths, RelayConfig("nats://127.0.0.1:4222", "laptop", None))
    config_path(paths).write_text('{"url": 3}')
    with pytest.raises(RelayConfigError, match=r"damaged.*relay leave"):
        load(paths)
