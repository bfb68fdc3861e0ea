"""Git-bus wiring for the e2e tests: a bare remote and two "machines" (ops, gpu) that differ only in CROSSTALK_HOME
and CROSSTALK_ALIAS, a models registry that runs a real harness CLI (from a conftest HarnessRun) against its mock,
and the real `crosstalk daemon dispatch` as a subprocess.

A copy of the minimal wiring of tests/integration/bus/conftest.py: that module is imported as `conftest` there, a
name the e2e conftest takes here, so it cannot be imported from this directory.

    with bus_pair() as pair:                           # ops ran `transport init --remote`, gpu cloned it
        text, env = harness_provider(run, "claude", {"mock": []})
        pair.commit_registry(text)
        with Dispatcher(pair.gpu, env) as daemon:
            rel = pair.send("claude/mock@gpu", "question")
            statuses = wait_replied(pair.ops, [rel], daemon)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crosstalk.bus.message import BusMessage, parse_message

if TYPE_CHECKING:  # conftest is the e2e fixture module; not imported at run time (several dirs have one)
    from conftest import HarnessRun
    from mock_models import MockModelServer

TRANSPORT = "bus"
CLI_TIMEOUT = 60.0
GIT_TIMEOUT = 60.0
REPLY_TIMEOUT = 180.0
GIT_ID = ("-c", "user.name=test", "-c", "user.email=test@example.invalid")
# Harness variables the dispatcher's own environment already provides in the right form.
_INHERITED = ("PATH",)


@dataclass
class BusMachine:
    """One simulated host: its own crosstalk state root and alias, an empty global git config (no identity)."""

    alias: str
    base: Path
    env: dict[str, str] = field(default_factory=dict)
    root: Path | None = None  # the transport's work tree on this machine

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def state_dir(self) -> Path:
        return self.home / "bus" / "state" / TRANSPORT

    def cli(self, *args: str, input: str | None = None,
            timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "crosstalk", *args], env=self.env, cwd=self.root or self.base,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def git(self, *args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=self.root or self.base, env=self.env, capture_output=True,
                              text=True, timeout=GIT_TIMEOUT, check=False)
        assert proc.returncode == 0, f"git {' '.join(args)} on {self.alias}: {proc.stderr}"
        return proc.stdout


def _machine(tmp: Path, alias: str) -> BusMachine:
    base = tmp / alias
    base.mkdir()
    gitconfig = base / "gitconfig"
    gitconfig.write_text("")
    # Nothing inherited but PATH: no API keys or session variables of the caller reach crosstalk or the harness.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(base),
        "USER": f"op-{alias}",
        "TMPDIR": str(tmp),
        "CROSSTALK_HOME": str(base / "home"),
        "CROSSTALK_ALIAS": alias,
        "GIT_CONFIG_GLOBAL": str(gitconfig),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return BusMachine(alias, base, env)


@dataclass
class BusPair:
    ops: BusMachine
    gpu: BusMachine
    remote: Path
    channel: str

    def commit_registry(self, text: str) -> None:
        """Commit data/crosstalk.yaml on ops with plain git and push it; gpu pulls it."""
        assert self.ops.root is not None
        (self.ops.root / "data" / "crosstalk.yaml").write_text(text)
        self.ops.git("add", "--", "data/crosstalk.yaml")
        self.ops.git(*GIT_ID, "commit", "-q", "-m", "test: registry")
        self.ops.git("push", "-q", "origin", "HEAD:main")
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
        remote = tmp / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)], check=True,
                       capture_output=True, timeout=GIT_TIMEOUT, env={"PATH": os.environ.get("PATH", "/usr/bin")})
        ops, gpu = _machine(tmp, "ops"), _machine(tmp, "gpu")
        res = ops.cli("transport", "init", TRANSPORT, "--dir", str(ops.base / TRANSPORT), "--remote", str(remote))
        assert res.returncode == 0, res.stderr
        ops.root = Path(res.stdout.strip())
        res = ops.cli("channel", "create", "general")
        assert res.returncode == 0, res.stderr
        channel = res.stdout.strip()
        res = gpu.cli("transport", "clone", str(remote), "--dir", str(gpu.base / TRANSPORT))
        assert res.returncode == 0, res.stderr
        gpu.root = Path(res.stdout.strip())
        yield BusPair(ops, gpu, remote, channel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def harness_provider(run: HarnessRun, provider: str,
                     models: Mapping[str, Sequence[str]]) -> tuple[str, dict[str, str]]:
    """The registry text declaring `provider` with one model per entry of `models` (name -> argv replacements
    (old, new, old, new ...) applied to the harness's argv_prefix), and the environment the dispatcher needs.

    Every variable the harness needs (the mock's URL, its isolated HOME and config dirs) is declared under the
    provider's `env:` as a ${XT_...} reference — the registry refuses raw values — and the value rides in the
    dispatcher's own environment. The mock's base URL is ${XT_MOCK_URL}."""
    refs: dict[str, str] = {}
    daemon_env: dict[str, str] = {}
    for key, value in sorted(run.env.items()):
        if key in _INHERITED:
            continue
        var = "XT_MOCK_URL" if value == run.mock.base_url else f"XT_{key}"
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


class Dispatcher:
    """The real `crosstalk daemon dispatch --interval 1` on a machine, with extra environment; stopped by PID."""

    def __init__(self, machine: BusMachine, extra_env: Mapping[str, str]) -> None:
        self.machine = machine
        self.out = machine.base / "daemon.out"
        self._fh = open(self.out, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "crosstalk", "daemon", "dispatch", "--interval", "1"],
                                     cwd=machine.root, env={**machine.env, **extra_env}, stdin=subprocess.DEVNULL,
                                     stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True)

    def heartbeat(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.machine.state_dir / "heartbeat.json").read_text()))
        except (FileNotFoundError, ValueError):
            return {}

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """The first heartbeat of this process (which lists the models it claimed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            beat = self.heartbeat()
            if beat.get("pid") == self.proc.pid:
                return beat
            assert self.proc.poll() is None, f"the dispatcher exited {self.proc.returncode}:\n{self.tail()}"
            time.sleep(0.1)
        raise AssertionError(f"no dispatcher heartbeat within {timeout:g} s:\n{self.tail()}")

    def tail(self, chars: int = 4000) -> str:
        log = self.machine.state_dir / "dispatcher.log"
        text = self.out.read_text(errors="replace") if self.out.exists() else ""
        if log.exists():
            text += "\n--- dispatcher.log ---\n" + log.read_text(errors="replace")
        return text[-chars:]

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._fh.close()

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_replied(machine: BusMachine, rels: Sequence[str], daemon: Dispatcher,
                 timeout: float = REPLY_TIMEOUT) -> list[dict[str, Any]]:
    """Polls the real `crosstalk message replies RELPATH... --pull --json` until it exits 0 (all REPLIED or
    FAILED); its JSON statuses."""
    deadline = time.monotonic() + timeout
    last: subprocess.CompletedProcess[str] | None = None
    while time.monotonic() < deadline:
        last = machine.cli("message", "replies", *rels, "--pull", "--json")
        if last.returncode == 0:
            return list(json.loads(last.stdout))
        assert last.returncode == 2, f"message replies exited {last.returncode}: {last.stderr}"
        assert daemon.proc.poll() is None, f"the dispatcher died ({daemon.proc.returncode}):\n{daemon.tail()}"
        time.sleep(0.5)
    raise AssertionError(f"no reply within {timeout:g} s (last: {last.stdout if last else ''!r}):\n{daemon.tail()}")


def protocol_line(root: Path) -> str:
    """A distinctive line of the transport's PROTOCOL.md (long, plain prose that JSON leaves unescaped)."""
    lines = [ln.strip() for ln in (root / "PROTOCOL.md").read_text().splitlines()]
    plain = [ln for ln in lines if len(ln) > 60 and not ln.startswith(("#", "-", "`")) and '"' not in ln
             and "\\" not in ln]
    assert plain, "PROTOCOL.md has no plain prose line"
    return plain[0]


def reject_model(mock: MockModelServer, model: str) -> None:
    """Make the Anthropic mock answer 404 not_found_error to requests for `model` (Claude Code then exits 1 at
    once, where a closed port would have it retry for minutes)."""
    serve = mock.handle_post

    def handle_post(h: Any, req: Any) -> None:
        if mock.is_generation_path(req.path) and req.body.get("model") == model:
            h.send_json(404, {"type": "error",
                              "error": {"type": "not_found_error", "message": f"model: {model} (mock rejects it)"}})
            return
        serve(h, req)

    mock.handle_post = handle_post  # type: ignore[method-assign]
