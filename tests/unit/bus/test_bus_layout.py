"""The transport layout: version check wording, find_root, the scaffold template, channel name rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crosstalk.bus.errors import ChannelError, NotATransport, VersionMismatch
from crosstalk.bus.protocol import layout
from crosstalk.bus.transport.channels import parse_channel, render_channel, validate_channel_name


def test_scaffold_writes_the_template(tmp: Path) -> None:
    files = layout.scaffold(tmp / "t")
    assert set(files) == {
        "CROSSTALK-VERSION",
        "CROSSTALK.md",
        "PROTOCOL.md",
        ".gitignore",
        "data/crosstalk.yaml",
        "local/actors/.gitkeep",
    }
    assert (tmp / "t" / "CROSSTALK-VERSION").read_text() == "7\n"
    ignore = (tmp / "t" / ".gitignore").read_text().split()
    assert "auth/" in ignore and "*.env" in ignore
    registry = yaml.safe_load((tmp / "t" / "data" / "crosstalk.yaml").read_text())
    assert set(registry["providers"]) == {"anthropic", "openai", "pi"}
    for provider in registry["providers"].values():
        for value in provider.get("env", {}).values():
            assert value.startswith("${") and value.endswith("}")  # never a raw secret
    protocol = (tmp / "t" / "PROTOCOL.md").read_text()
    for phrase in ("crosstalk message send", "message replies", "channel list", "crosstalk status", "failed: true"):
        assert phrase in protocol


def test_check_version(tmp: Path) -> None:
    root = tmp / "t"
    root.mkdir()
    with pytest.raises(NotATransport, match=r"is not a crosstalk transport \(no CROSSTALK-VERSION\)"):
        layout.check_version(root)
    (root / "CROSSTALK-VERSION").write_text("6\n")
    with pytest.raises(VersionMismatch) as info:
        layout.check_version(root, "old")
    assert info.value.message.startswith("transport old speaks crosstalk protocol v6; this crosstalk speaks v7 — ")
    (root / "CROSSTALK-VERSION").write_text("8\n")
    with pytest.raises(VersionMismatch, match="upgrade crosstalk"):
        layout.check_version(root)
    (root / "CROSSTALK-VERSION").write_text("seven\n")
    with pytest.raises(NotATransport, match="garbled"):
        layout.check_version(root)
    (root / "CROSSTALK-VERSION").write_text("7\n")
    with pytest.raises(NotATransport, match="not a git work tree"):
        layout.check_version(root)
    (root / ".git").mkdir()
    layout.check_version(root)


def test_find_root_walks_up(tmp: Path) -> None:
    root = tmp / "t"
    (root / ".git").mkdir(parents=True)
    (root / "CROSSTALK-VERSION").write_text("7\n")
    (root / "data" / "channels").mkdir(parents=True)
    assert layout.find_root(root / "data" / "channels") == root
    assert layout.find_root(tmp) is None


@pytest.mark.parametrize("name", ["general", "General", "a", "x" * 64, "design review", "ünïcode", "a.b-c_d"])
def test_channel_names_ok(name: str) -> None:
    assert validate_channel_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("x" * 65, "limit is 64"),
        ("a/b", "'/'"),
        ("a\nb", "line breaks"),
        (" padded", "whitespace"),
        ("0B8E3A52-8D6E-4C7E-9A51-0F3B2F8F3D10", "looks like a UUID"),
    ],
)
def test_channel_names_refused(name: str, why: str) -> None:
    with pytest.raises(ChannelError) as info:
        validate_channel_name(name)
    assert why in info.value.message


def test_channel_file_round_trip() -> None:
    text = render_channel("review: phase 2", "0b8e3a52-8d6e-4c7e-9a51-0f3b2f8f3d10")
    channel = parse_channel(text, "u")
    assert channel is not None
    assert (channel.name, channel.parent) == ("review: phase 2", "0b8e3a52-8d6e-4c7e-9a51-0f3b2f8f3d10")
    assert parse_channel("no front matter", "u") is None
    assert parse_channel("---\nparent: x\n---\n", "u") is None
