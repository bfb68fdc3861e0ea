from __future__ import annotations

import hmac
import os
import stat
from pathlib import Path

import pytest

from crosstalk.registry.credentials import create_key, read_key, remove_key
from crosstalk.registry.errors import KeyFileError


def test_create_and_read(tmp_root: Path) -> None:
    path = tmp_root / "a.key"
    token = create_key(path)
    assert len(token) == 64 and int(token, 16) >= 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert hmac.compare_digest(read_key(path), token)
    assert [p.name for p in tmp_root.iterdir()] == ["a.key"]  # no temp file left behind


def test_create_replaces_our_old_key_even_if_wide(tmp_root: Path) -> None:
    path = tmp_root / "a.key"
    old = create_key(path)
    os.chmod(path, 0o644)
    new = create_key(path)
    assert new != old
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_key(path) == new


def test_create_under_a_narrow_umask_is_exactly_0600(tmp_root: Path) -> None:
    old = os.umask(0o377)
    try:
        create_key(tmp_root / "a.key")
    finally:
        os.umask(old)
    assert read_key(tmp_root / "a.key")


def test_missing(tmp_root: Path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        read_key(tmp_root / "nope.key")


def test_symlink_refused(tmp_root: Path) -> None:
    real = tmp_root / "real.key"
    create_key(real)
    link = tmp_root / "link.key"
    link.symlink_to(real)
    with pytest.raises(KeyFileError, match=r"link\.key: is a symlink"):
        read_key(link)
    with pytest.raises(KeyFileError, match="symlink"):
        create_key(link)


def test_wide_mode_refused(tmp_root: Path) -> None:
    path = tmp_root / "a.key"
    create_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(KeyFileError, match="has mode 0644; it must be exactly 0600"):
        read_key(path)
    os.chmod(path, 0o400)  # narrower is refused too: exactly 0600 is the contract
    with pytest.raises(KeyFileError, match="0400"):
        read_key(path)


def test_directory_refused(tmp_root: Path) -> None:
    path = tmp_root / "a.key"
    path.mkdir(mode=0o700)
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_key(path)
    with pytest.raises(KeyFileError, match="not a regular file"):
        create_key(path)


def test_fifo_refused_without_blocking(tmp_root: Path) -> None:
    path = tmp_root / "a.key"
    os.mkfifo(path, 0o600)
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_key(path)


@pytest.mark.parametrize("content", [b"", b"  \n"])
def test_empty_refused(tmp_root: Path, content: bytes) -> None:
    path = tmp_root / "a.key"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, content)
    os.close(fd)
    with pytest.raises(KeyFileError, match="is empty"):
        read_key(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another uid")
def test_other_uid_refused(tmp_root: Path) -> None:
    path = tmp_root / "a.key"
    create_key(path)
    os.chown(path, 65534, 65534)
    with pytest.raises(KeyFileError, match="owned by uid 65534"):
        read_key(path)
    with pytest.raises(KeyFileError, match="owned by uid 65534"):
        create_key(path)


def test_remove_is_idempotent(tmp_root: Path) -> None:
    path = tmp_root / "a.key"
    create_key(path)
    remove_key(path)
    remove_key(path)
    assert not path.exists()
