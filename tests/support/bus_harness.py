"""Git-bus wiring for the e2e tests: a bare remote and two "machines" (ops, gpu) that differ only in CROSSTALK_HOME
and CROSSTALK_ALIAS, a models registry that runs a real harness CLI (from a conftest HarnessRun) against its mock,
and the real `crosstalk daemon dispatch` as a subprocess.

The machines, the dispatcher process and the reply polling are the integration tests' own (tests.support.bus_machines
and tests.support.bus_dispatch). Only the environment differs: nothing of the caller's but PATH reaches crosstalk or
the harness.

    with bus_pair() as pair:                           # ops ran `transport init --remote`, gpu cloned it
        text, env = harness_provider(run, "claude", {"mock": []})
        pair.commit_registry(text)
        with Daemon(pair.gpu, "--interval", "1", env=env) as daemon:
            rel = pair.send("claude/mock@gpu", "question")
            statuses = wait_replied(pair.ops, [rel], REPLY_TIMEOUT, daemon)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crosstalk.bus.protocol.message import BusMessage, parse_message
from tests.support.bus_dispatch import Daemon, commit_files, wait_replied
from tests.support.bus_machines import Machine, init_bare_remote, join_two, new_machine
from tests.support.harness_run import HarnessRun

if TYPE_CHECKING:
    from crosstalk.demo.models import ScriptedModelServer
    from crosstalk.demo.models.base import RecordedRequest

__all__ = [
    "REPLY_TIMEOUT",
    "BusPair",
    "Daemon",
    "bus_pair",
    "harness_provider",
    "protocol_line",
    "refuse",
    "reject_model",
    "wait_replied",
]

REPLY_TIMEOUT = 180.0
# Harness variables the dispatcher's own environment already provides in the right form.
_INHERITED = ("PATH",)


@dataclass
class BusPair:
    ops: Machine
    gpu: Machine
    remote: Path
    channel: str

    def commit_registry(self, text: str) -> None:
        """Commit data/crosstalk.yaml on ops with plain git and push it; gpu pulls it."""
        commit_files(self.ops, {"data/crosstalk.yaml": text}, "test: registry")
        self.gpu.git("pull", "-q")

    def send(self, to: str, body: str, *, input: str | None = None) -> str:
        """The real `crosstalk message send` on ops; the transport-relative path it printed."""
        res = self.ops.cli("message", "send", "--to", to, body, input=input)
        assert res.returncode == 0, f"message send exited {res.returncode}: {res.stderr}"
        paths = res.stdout.split()
        assert len(paths) == 1, res.stdout
        return paths[0]

    def read(self, rel: str) -> BusMessage:
        assert self.ops.root is not None
        return parse_message((self.ops.root / rel).read_text(), where=rel)


@contextlib.contextmanager
def bus_pair() -> Iterator[BusPair]:
    """ops: `transport init bus --remote <bare>` + `channel create general`; gpu: `transport clone`. Removed after."""
    tmp = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    try:
        # Nothing inherited but PATH: no API keys or session variables of the caller reach crosstalk or the harness.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "TMPDIR": str(tmp)}
        two = join_two(new_machine(tmp, "ops", env), new_machine(tmp, "gpu", env), init_bare_remote(tmp / "remote.git"))
        yield BusPair(two.a, two.b, two.remote, two.channel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def harness_provider(
    run: HarnessRun, provider: str, models: Mapping[str, Sequence[str]], *, prefix: str = "XT_"
) -> tuple[str, dict[str, str]]:
    """The registry text declaring `provider` with one model per entry of `models` (name -> argv replacements
    (old, new, old, new ...) applied to the harness's argv_prefix), and the environment the dispatcher needs.

    Every variable the harness needs (the mock's URL, its isolated HOME and config dirs) is declared under the
    provider's `env:` as a ${XT_...} reference — the registry refuses raw values — and the value rides in the
    dispatcher's own environment. The mock's base URL is ${XT_MOCK_URL}. Several harnesses in one registry need
    distinct `prefix`es (their HOMEs differ)."""
    refs: dict[str, str] = {}
    daemon_env: dict[str, str] = {}
    for key, value in sorted(run.env.items()):
        if key in _INHERITED:
            continue
        var = f"{prefix}MOCK_URL" if value == run.mock.base_url else f"{prefix}{key}"
        refs[key] = "${" + var + "}"
        daemon_env[var] = value
    lines = ["providers:", f"  {provider}:", f"    timeout: {REPLY_TIMEOUT - 30:g}", "    env:"]
    lines += [f"      {key}: {json.dumps(ref)}" for key, ref in refs.items()]
    lines.append("    models:")
    for name, swaps in models.items():
        argv = list(run.argv_prefix)
        for old, new in zip(swaps[::2], swaps[1::2], strict=True):
            argv[argv.index(old)] = new
        lines.append(f"      {name}: {json.dumps(' '.join(argv))}")
    return "\n".join(lines) + "\n", daemon_env


def protocol_line(root: Path) -> str:
    """A distinctive line of the transport's PROTOCOL.md (long, plain prose that JSON leaves unescaped)."""
    lines = [ln.strip() for ln in (root / "PROTOCOL.md").read_text().splitlines()]
    plain = [
        ln for ln in lines if len(ln) > 60 and not ln.startswith(("#", "-", "`")) and '"' not in ln and "\\" not in ln
    ]
    assert plain, "PROTOCOL.md has no plain prose line"
    return plain[0]


def refuse(
    mock: ScriptedModelServer, when: Callable[[RecordedRequest], bool], status: int, error: dict[str, str]
) -> None:
    """Make `mock` answer HTTP `status` with `{"error": error}` (plus Anthropic's `"type": "error"`) to every
    generation request `when` holds for, and serve the rest as before: a model API refusing that one request."""
    serve = mock.handle_post

    def handle_post(h: Any, req: RecordedRequest) -> None:
        if mock.is_generation_path(req.path) and when(req):
            h.send_json(status, {"type": "error", "error": error})
            return
        serve(h, req)

    mock.handle_post = handle_post  # type: ignore[method-assign]


def reject_model(mock: ScriptedModelServer, model: str) -> None:
    """Make the Anthropic mock answer 404 not_found_error to requests for `model` (Claude Code then exits 1 at
    once, where a closed port would have it retry for minutes)."""
    error = {"type": "not_found_error", "message": f"model: {model} (mock rejects it)"}
    refuse(mock, lambda req: req.body.get("model") == model, 404, error)
