"""Helpers for the dispatcher tests: script models, the registry, sending, running dispatchers, reading replies.

Models are small scripts written to a temp dir and named by absolute path in data/crosstalk.yaml. Every script
appends one JSON line per run to its record file: {"argv": [...], "stdin": bool, "prompt": str, "env": {...}}.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.bus.errors import MessageFormatError
from crosstalk.bus.protocol.message import BusMessage, parse_message
from tests.support.bus_machines import GIT_TIMEOUT, Machine, clean_env, remote_git

GIT_ID = ("-c", "user.name=test", "-c", "user.email=test@example.invalid")

MODEL_TEMPLATE = """#!{python}
import json, os, sys, time
args = sys.argv[1:]
from_stdin = not args
prompt = sys.stdin.read() if from_stdin else args[-1]
env = {{k: v for k, v in os.environ.items() if k.startswith("CROSSTALK_")}}
with open({record!r}, "a") as fh:
    record = {{"argv": args, "stdin": from_stdin, "prompt": prompt, "env": env, "pid": os.getpid()}}
    fh.write(json.dumps(record) + "\\n")
{body}
"""


def write_model(folder: Path, name: str, body: str = 'print("answer from " + os.environ["CROSSTALK_FROM"])') -> Path:
    """An executable python model at folder/name; body runs after the run was recorded to folder/name.jsonl."""
    path = folder / name
    path.write_text(MODEL_TEMPLATE.format(python=sys.executable, record=str(folder / f"{name}.jsonl"), body=body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def runs(model: Path) -> list[dict[str, object]]:
    """The recorded runs of a model written by write_model."""
    record = model.with_name(model.name + ".jsonl")
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def registry_yaml(providers: dict[str, dict[str, str]], timeouts: dict[str, float] | None = None) -> str:
    lines = ["providers:"]
    for provider, models in providers.items():
        lines.append(f"  {provider}:")
        if timeouts and provider in timeouts:
            lines.append(f"    timeout: {timeouts[provider]}")
        lines.append("    models:")
        lines.extend(f"      {name}: {command}" for name, command in models.items())
    return "\n".join(lines) + "\n"


def commit_files(machine: Machine, files: dict[str, str], message: str = "test: files", *, push: bool = True) -> None:
    """Write and commit files in the machine's work tree with plain git (and push when there is a remote)."""
    assert machine.root is not None
    for rel, text in files.items():
        path = machine.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    machine.git("add", "--", *files)
    machine.git(*GIT_ID, "commit", "-q", "-m", message)
    if push and machine.git("remote").strip():
        machine.git("push", "-q", "origin", "HEAD:main")


def set_registry(machine: Machine, providers: dict[str, dict[str, str]], **kw: object) -> None:
    commit_files(machine, {"data/crosstalk.yaml": registry_yaml(providers, **kw)}, "test: registry")  # type: ignore[arg-type]


def single_machine(make_machine: Callable[[str], Machine], alias: str = "m1") -> tuple[Machine, str]:
    """A machine with a local-only transport `bus` (no remote) and a channel `general`; (machine, channel uuid)."""
    m = make_machine(alias)
    res = m.cli("transport", "init", "bus", "--dir", str(m.base / "bus"))
    assert res.returncode == 0, res.stderr
    m.root = Path(res.stdout.strip())
    res = m.cli("channel", "create", "general")
    assert res.returncode == 0, res.stderr
    return m, res.stdout.strip()


def machine_with_models(make_machine: Callable[[str], Machine], **bodies: str) -> tuple[Machine, str, Path]:
    """single_machine plus script models under local/: name=body (a write_model body; "" for the default echo of
    CROSSTALK_FROM). Returns (machine, channel uuid, models dir)."""
    m, channel = single_machine(make_machine)
    models = m.base / "models"
    models.mkdir()
    paths = {name: write_model(models, name, *([body] if body else [])) for name, body in bodies.items()}
    set_registry(m, {"local": {name: str(path) for name, path in paths.items()}})
    return m, channel, models


def run_spec(spec: Any, prompt: str, *, timeout: float | None = None, **kw: Any) -> Any:
    """Run a registry ModelSpec as the dispatcher does: its argv, its own timeout unless one is given."""
    from crosstalk.bus.runs.runner import run_headless

    return run_headless(spec.argv, prompt, timeout=spec.timeout if timeout is None else timeout, **kw)


def in_process_dispatcher(machine: Machine, monkeypatch: Any) -> Any:
    """A crosstalk.bus.dispatch.dispatcher.Dispatcher in this process, for `machine` (registry loaded). The store wakes
    and git runs with the process env, so this process is made to look like the machine (monkeypatch undoes it)."""
    from crosstalk.bus.dispatch.dispatcher import Dispatcher
    from crosstalk.bus.dispatch.eventlog import EventLog
    from crosstalk.bus.transport.transports import resolve_transport

    for key in ("CROSSTALK_HOME", "CROSSTALK_ALIAS", "HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):
        monkeypatch.setenv(key, machine.env[key])
    transport = resolve_transport(machine.root, None, dict(os.environ))
    state = transport.state(os.environ).ensure()
    dispatcher = Dispatcher(transport, jobs=2, interval=1.0, log=EventLog(state.log))
    dispatcher.reload_registry(force=True)
    return dispatcher


def send(
    machine: Machine,
    to: str,
    body: str,
    *,
    sender: str = "alice",
    extra: Iterable[str] = (),
    env: dict[str, str] | None = None,
) -> list[str]:
    """`message send` through the CLI; the transport-relative paths it printed."""
    res = machine.cli("message", "send", "--to", to, "--from", sender, *extra, body, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def dispatch_once(machine: Machine, *extra: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    res = machine.cli("daemon", "dispatch", "--once", *extra, timeout=timeout)
    assert res.returncode == 0, res.stderr
    return res


def channel_messages(root: Path, channel: str) -> dict[str, BusMessage]:
    """channel-relative path -> parsed message, for every message file in the work tree's channel."""
    base = root / "data" / "channels" / channel
    out: dict[str, BusMessage] = {}
    for path in sorted(base.rglob("*.md")):
        rel = path.relative_to(base).as_posix()
        if rel != "CHANNEL.md":
            with contextlib.suppress(MessageFormatError):  # a deliberately broken file in a test
                out[rel] = parse_message(path.read_text(), where=rel)
    return out


def replies_to(root: Path, channel: str, rel_path: str) -> list[BusMessage]:
    """Messages in the channel whose re: lists the given (transport- or channel-relative) path."""
    target = rel_path.split(f"{channel}/", 1)[-1]
    return [m for m in channel_messages(root, channel).values() if target in m.re]


def channel_rel(path: str) -> str:
    """data/channels/<uuid>/YYYY/... -> YYYY/..."""
    return path.split("/", 3)[3]


def log_text(machine: Machine) -> str:
    path = machine.state_dir / "dispatcher.log"
    return path.read_text(errors="replace") if path.exists() else ""


def heartbeat(machine: Machine) -> dict[str, Any]:
    try:
        return dict(json.loads((machine.state_dir / "heartbeat.json").read_text()))
    except (FileNotFoundError, ValueError):
        return {}


def wait_for(predicate: Callable[[], object], timeout: float, what: str, poll: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Daemon:
    """`crosstalk daemon dispatch` as a subprocess of the test (with the machine's env plus `env`), stopped (by pid)
    on exit."""

    def __init__(
        self, machine: Machine, *args: str, log_name: str = "daemon.out", env: Mapping[str, str] | None = None
    ) -> None:
        self.machine = machine
        self.out = machine.base / log_name
        self._fh = open(self.out, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crosstalk", "daemon", "dispatch", *args],
            cwd=machine.root,
            env={**machine.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def tail(self, chars: int = 4000) -> str:
        """The end of the daemon's output and of the dispatcher log, for failure messages."""
        out = self.out.read_text(errors="replace") if self.out.exists() else ""
        return (out + "\n--- dispatcher.log ---\n" + log_text(self.machine))[-chars:]

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """Its first heartbeat (which lists the models it claimed)."""
        try:
            wait_for(
                lambda: heartbeat(self.machine).get("pid") == self.proc.pid or self.proc.poll() is not None,
                timeout,
                "the daemon's first heartbeat",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}:\n{self.tail()}") from None
        assert self.proc.poll() is None, f"the dispatcher exited {self.proc.returncode}:\n{self.tail()}"
        return heartbeat(self.machine)

    def kill9(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._fh.close()

    def stop(self, timeout: float = 20.0) -> int | None:
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
        return self.proc.returncode

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_replied(
    machine: Machine, paths: Sequence[str], timeout: float = 60.0, daemon: Daemon | None = None
) -> list[dict[str, Any]]:
    """Polls `message replies PATH... --pull --json` on `machine` until it exits 0 (every path REPLIED or FAILED);
    its JSON statuses. Fails at once on any other answer than PENDING (exit 1 with the statuses), or when `daemon`
    died meanwhile."""

    def statuses() -> list[dict[str, Any]] | None:
        res = machine.cli("message", "replies", *paths, "--pull", "--json")
        pending = res.returncode == 1 and res.stdout.startswith("[") and "PENDING" in res.stdout
        assert res.returncode == 0 or pending, f"message replies exited {res.returncode}: {res.stderr}"
        if daemon is not None:
            assert daemon.proc.poll() is None, f"the dispatcher died ({daemon.proc.returncode}):\n{daemon.tail()}"
        return list(json.loads(res.stdout)) if res.returncode == 0 else None

    try:
        return wait_for(statuses, timeout, f"replies to {' '.join(paths)}", poll=0.5)  # type: ignore[return-value]
    except AssertionError as exc:
        if daemon is None:
            raise
        raise AssertionError(f"{exc}:\n{daemon.tail()}") from None


def pid_alive(pid: int) -> bool:
    """Whether the process lives (a zombie has already died)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_pid_group(pid: int) -> None:
    """End a leftover model process (it runs in its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


_BLOBS: dict[str, str] = {}  # blob id -> text: a blob never changes, so each is read from git once


def remote_files(remote: Path) -> dict[str, str]:
    """Every message file on the bare remote's main: transport-relative path -> text (two git processes at most).

    Blobs are asked for by id, and only those not read before: a `main:PATH` lookup walks the tree again for each
    name, so a suite that polls a remote of thousands of messages spent seconds a poll on it (quadratic).
    """
    entries: list[tuple[str, str]] = []
    for item in remote_git(remote, "ls-tree", "-r", "-z", "main", "--", "data/channels").split("\0"):
        meta, _, name = item.partition("\t")
        if name.endswith(".md") and not name.endswith("/CHANNEL.md"):
            entries.append((name, meta.split()[2]))
    missing = sorted({blob for _, blob in entries if blob not in _BLOBS})
    if missing:
        out = subprocess.run(
            ["git", "--git-dir", str(remote), "cat-file", "--batch"],
            input="".join(f"{blob}\n" for blob in missing).encode(),
            capture_output=True,
            timeout=GIT_TIMEOUT,
            env=clean_env(),
            check=True,
        ).stdout
        pos = 0
        for blob in missing:
            header_end = out.index(b"\n", pos)
            size = int(out[pos:header_end].split()[2])
            _BLOBS[blob] = out[header_end + 1 : header_end + 1 + size].decode()
            pos = header_end + 1 + size + 1
    return {name: _BLOBS[blob] for name, blob in entries}
