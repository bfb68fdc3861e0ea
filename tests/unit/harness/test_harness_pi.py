"""The pi harness without pi: the tags a message reads with, the adapter's outcomes over a link whose other end is this
test, and `crosstalk install pi` (pi's settings and the extension's config, idempotent, the user's settings kept)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.harness.base import InjectRequest
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, InstallError, PreSendFailure
from crosstalk.harness.pi import install as setup
from crosstalk.harness.pi.adapter import PiAdapter
from crosstalk.harness.pi.link import PiLink
from crosstalk.harness.pi.render import render

ORCH = Sender(SenderClass.VERIFIED, "0123456789abcdef", "orch", "a2a")
CI = Sender(SenderClass.EXTERNAL, None, "@ci:build", "uds")


def request(text: str = "hi", *, sender: Sender = ORCH, bucket: str = "parent", kind: Kind = Kind.INFORM,
            delivery: Delivery = Delivery.AUTO, in_reply_to: str | None = None) -> InjectRequest:  # fmt: skip
    msg = Message(message_id=new_message_id(), to="w", parts=(TextPart(text),), kind=kind, delivery=delivery,
                  in_reply_to=in_reply_to)  # fmt: skip
    return InjectRequest(msg, sender, delivery, meta=kind is Kind.META, bucket=bucket)


@pytest.mark.parametrize(
    ("req", "tag"),
    [
        (request(), "[from parent:orch] hi"),
        (request(delivery=Delivery.STEER), "[from parent:orch · steer] hi"),
        (request(delivery=Delivery.NEXT_TURN, bucket="children"), "[from children:orch · followUp] hi"),
        (request(sender=CI, bucket="external"), "[from @ci:build] hi"),
        (request(kind=Kind.META, bucket="peers"), "[crosstalk meta from peers:orch] hi"),
        (request(bucket="agents", in_reply_to="01a2"), "[reply from agents:orch · to 01a2] hi"),
    ],
)
def test_seed_004_tags(req: InjectRequest, tag: str):
    assert render(req) == tag


def test_an_ask_carries_its_id_for_the_reply_tool():
    req = request("which branch?", kind=Kind.ASK, bucket="agents")
    assert render(req) == f"[ask from agents:orch · id {req.message.message_id}] which branch?"


class Other:
    """The extension's end of a link: answers each deliver with `answer` (None: never)."""

    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.answer = answer
        self.reader = asyncio.StreamReader()
        self.sent: list[dict[str, Any]] = []
        self.link = PiLink(self.reader, self.write)

    def write(self, data: bytes) -> None:
        msg = json.loads(data)
        self.sent.append(msg)
        if msg.get("t") == "deliver" and self.answer is not None:
            self.reader.feed_data((json.dumps({"t": "delivered", "ref": msg["ref"], **self.answer}) + "\n").encode())


@pytest.mark.parametrize(
    ("answer", "state"),
    [
        ({"delivered": "immediate"}, State.ACCEPTED),
        ({"delivered": "queued"}, State.QUEUED),
        ({"delivered": "noted"}, State.QUEUED),
    ],
)
def test_the_extensions_answer_is_the_outcome(answer: dict[str, Any], state: State):
    async def main() -> None:
        other = Other(answer)
        reading = asyncio.ensure_future(other.link.run())
        result = await PiAdapter(other.link).inject(request(delivery=Delivery.STEER))
        assert result.state is state and result.evidence == {"pi": answer["delivered"]}
        assert other.sent[0]["as"] == "steer" and other.sent[0]["text"] == "[from parent:orch · steer] hi"
        other.reader.feed_eof()
        await reading

    asyncio.run(main())


def test_meta_goes_as_meta_and_failures_map_to_one_state_each(monkeypatch: pytest.MonkeyPatch):
    from crosstalk.harness.pi import adapter as pi_adapter

    monkeypatch.setattr(pi_adapter, "ANSWER_TIMEOUT_S", 0.2)

    async def main() -> None:
        refused = Other({"error": "no session"})
        reading = asyncio.ensure_future(refused.link.run())
        with pytest.raises(HarnessRefused, match="no session"):
            await PiAdapter(refused.link).inject(request(kind=Kind.META))
        assert refused.sent[0]["as"] == "meta"
        silent = Other(None)
        silent_reading = asyncio.ensure_future(silent.link.run())
        with pytest.raises(HarnessDisconnected, match="did not answer"):  # sent, never answered: unknown
            await PiAdapter(silent.link).inject(request())
        silent.reader.feed_eof()
        await silent_reading
        with pytest.raises(PreSendFailure):  # the link is closed: nothing is written
            await PiAdapter(silent.link).inject(request())
        with pytest.raises(PreSendFailure):  # not hosted by an extension at all
            await PiAdapter(None).inject(request())
        assert not (await PiAdapter(None).bind(None)).inbound_reachable  # type: ignore[arg-type]
        refused.reader.feed_eof()
        await reading

    asyncio.run(main())


def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}


def test_install_adds_the_package_keeps_the_rest_and_is_idempotent(tmp_path: Path):
    settings = tmp_path / "agent" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"theme": "dark", "packages": ["npm:@foo/bar@1.0.0"]}, indent=2))
    os.chmod(settings, 0o640)
    changes = setup.install("user", ["/opt/xt/crosstalk"], env(tmp_path), tmp_path)
    assert [c.action for c in changes] == ["updated", "created"]
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark" and data["packages"] == ["npm:@foo/bar@1.0.0", str(setup.package_dir())]
    assert oct(settings.stat().st_mode & 0o777) == "0o640"
    config = setup.config_file(env(tmp_path))
    assert json.loads(config.read_text()) == {"command": ["/opt/xt/crosstalk"]}
    before = settings.read_bytes(), config.read_bytes()
    again = setup.install("user", ["/opt/xt/crosstalk"], env(tmp_path), tmp_path)
    assert [c.action for c in again] == ["unchanged", "unchanged"]
    assert (settings.read_bytes(), config.read_bytes()) == before
    # a relative entry naming the same package (as `pi install ./path` writes it) counts as installed
    rel = os.path.relpath(setup.package_dir(), settings.parent)
    settings.write_text(json.dumps({"packages": [rel]}))
    assert setup.install("user", ["/opt/xt/crosstalk"], env(tmp_path), tmp_path)[0].action == "unchanged"
    # settings changed since install: only the package goes; the extension's config, as install wrote it, goes too
    assert [c.action for c in setup.uninstall("user", env(tmp_path), tmp_path)] == ["updated", "removed"]
    assert "packages" not in json.loads(settings.read_text())  # none left: no empty list behind
    assert not config.exists() and not (tmp_path / "home" / ".config").exists()
    assert [c.action for c in setup.uninstall("user", env(tmp_path), tmp_path)] == ["absent"]


def test_install_refuses_settings_it_cannot_keep(tmp_path: Path):
    settings = tmp_path / "agent" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{not json")
    with pytest.raises(InstallError, match=r"settings\.json: not valid JSON"):
        setup.install("user", ["/x"], env(tmp_path), tmp_path)
    settings.write_text(json.dumps({"packages": "oops"}))
    with pytest.raises(InstallError, match="'packages' is not a list"):
        setup.install("user", ["/x"], env(tmp_path), tmp_path)
    assert json.loads(settings.read_text()) == {"packages": "oops"}  # nothing written
    with pytest.raises(InstallError, match="unknown scope"):
        setup.install("global", ["/x"], env(tmp_path), tmp_path)
    project = setup.install("project", ["/x"], env(tmp_path), tmp_path)
    assert project[0].path == str(tmp_path / ".pi" / "settings.json")
