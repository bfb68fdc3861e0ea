"""crosstalk.bus.protocol.safefs: transport files are read without following any symlink, never block, never exceed a
cap; YAML aliases are refused before anything is built. Also the readers built on it (registry, env_file,
persona, CROSSTALK-VERSION)."""

from __future__ import annotations

import os
import time
from pathlib import Path, PurePosixPath

import pytest
import yaml

from crosstalk.bus.errors import ModelError, NotATransport, UnsafeFile
from crosstalk.bus.protocol.layout import read_version
from crosstalk.bus.protocol.models import ModelSpec, load_registry, parse_registry, spawn_env
from crosstalk.bus.protocol.safefs import is_regular_in, load_yaml, read_transport_bytes
from crosstalk.bus.runs.prompt import load_persona

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.fixture
def root(tmp: Path) -> Path:
    (tmp / "t" / "data").mkdir(parents=True)
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret").write_text("SECRET\n")
    return tmp / "t"


def test_a_regular_file_inside_is_read(root: Path) -> None:
    (root / "data" / "ok.md").write_text("fine")
    assert read_transport_bytes(root, "data/ok.md", 100) == b"fine"
    assert is_regular_in(root, "data/ok.md")


def test_a_symlinked_file_is_refused_naming_it(root: Path) -> None:
    os.symlink(root.parent / "outside" / "secret", root / "data" / "link.md")
    with pytest.raises(UnsafeFile, match=r"data/link\.md.*symlink"):
        read_transport_bytes(root, "data/link.md", 100)
    assert not is_regular_in(root, "data/link.md")


def test_a_symlinked_directory_on_the_path_is_refused(root: Path) -> None:
    os.symlink(root.parent / "outside", root / "data" / "dir")
    with pytest.raises(UnsafeFile, match=r"data/dir is a symlink"):
        read_transport_bytes(root, "data/dir/secret", 100)


def test_dev_zero_fifo_and_oversized_files_never_block_or_exceed_the_cap(root: Path) -> None:
    os.symlink("/dev/zero", root / "zero")
    os.mkfifo(root / "fifo")
    (root / "big").write_bytes(b"x" * 101)
    started = time.monotonic()
    for rel, why in (("zero", "symlink"), ("fifo", "not a regular file"), ("big", "limit")):
        with pytest.raises(UnsafeFile, match=why):
            read_transport_bytes(root, rel, 100)
    assert time.monotonic() - started < 5
    with pytest.raises(UnsafeFile):
        read_transport_bytes(root, "../outside/secret", 100)
    with pytest.raises(FileNotFoundError):
        read_transport_bytes(root, "data/missing", 100)


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    started = time.monotonic()
    with pytest.raises(yaml.YAMLError, match="alias"):
        load_yaml(BOMB, "x")
    assert time.monotonic() - started < 2
    assert load_yaml("a: 1\nb: [x]\n", "x") == {"a": 1, "b": ["x"]}
    assert load_yaml("timestamp: 2026-13-45\n", "x", strings_only=True) == {"timestamp": "2026-13-45"}


def test_the_registry_refuses_aliases_impossible_dates_and_symlinks(root: Path) -> None:
    with pytest.raises(ModelError, match="alias"):
        parse_registry("providers:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines()))
    with pytest.raises(ModelError, match=r"data/crosstalk\.yaml"):
        parse_registry("providers: {p: {timeout: 2026-13-45}}\n")
    os.symlink(root.parent / "outside" / "secret", root / "data" / "crosstalk.yaml")
    with pytest.raises(ModelError, match="symlink"):
        load_registry(root)


def test_env_file_persona_and_version_are_not_read_through_symlinks(root: Path) -> None:
    (root / "auth").mkdir()
    os.symlink(root.parent / "outside" / "secret", root / "auth" / "p.env")
    spec = ModelSpec(provider="p", name="m", argv=("true",), env_file=PurePosixPath("auth/p.env"))
    with pytest.raises(ModelError, match="symlink"):
        spawn_env(spec, {}, root)
    os.symlink(root.parent / "outside", root / "local")
    with pytest.raises(ModelError, match="symlink"):
        load_persona(root, "secret")
    os.symlink(root.parent / "outside" / "secret", root / "CROSSTALK-VERSION")
    with pytest.raises(NotATransport, match="symlink"):
        read_version(root)
