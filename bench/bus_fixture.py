"""Build big transports fast for the bus benchmarks: `crosstalk transport init`, then N message files committed in
one `git fast-import` stream (adding 100k files through `git add` takes minutes; fast-import takes seconds).

The messages are real v7 message files (crosstalk.bus.protocol.message.render_message), spread over channels and
days the way a long-lived transport accumulates them: most are answered operator tasks, so a dispatcher that started
after them has nothing to do — exactly the idle tick the benchmark measures.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from crosstalk.bus.protocol.message import BusMessage, render_message

GIT_TIMEOUT_S = 600.0
MESSAGES_PER_CHANNEL = 1000


def cli(args: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 120.0) -> str:
    """Run `crosstalk ARGS` as a user would; its stdout, or an exception with its stderr."""
    out = subprocess.run(
        [sys.executable, "-m", "crosstalk", *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"crosstalk {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def git(root: Path, *args: str, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT_S) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout.decode()


def command_and_word(args: list[str]) -> str:
    """`rev-parse HEAD`-style key of _raw's args: the subcommand and its first plain word."""
    words = [a for a in args[1:] if not a.startswith("-")]
    return " ".join([args[0], *words[:1]])


class GitTimer:
    """Wraps one GitRepo's `_raw` to record the wall time of every git subprocess while `active`, by `key(args)`."""

    def __init__(self, repo: Any, key: Callable[[list[str]], str] = command_and_word) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.active = False
        inner = repo._raw

        def raw(args: list[str], **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(args, **kw)
            finally:
                if self.active:
                    self.samples[key(args)].append(time.perf_counter() - t0)

        repo._raw = raw  # an instance attribute shadows the method for this repo only


def remote_head(bare: Path) -> str:
    """The bare remote's main, read from its ref file (cheap enough to poll); git's answer if it was packed."""
    try:
        return (bare / "refs" / "heads" / "main").read_text().strip()
    except FileNotFoundError:
        return git(bare, "rev-parse", "refs/heads/main").strip()


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in a state file (heartbeat, cursor), or {} while it is missing or half written."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def wait_for(cond: Callable[[], object], timeout: float, what: str, poll: float = 0.005) -> None:
    """Poll `cond` until it holds; RuntimeError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


def _channel_md(name: str) -> bytes:
    return f"---\nname: {name}\n---\n".encode()


def fast_import_messages(root: Path, count: int, *, branch: str = "main") -> int:
    """Commit `count` answered-task message pairs' worth of files (count files in all) on top of `branch`, as
    one commit. Returns the number of message files written."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    chunks: list[bytes] = []
    mark = 0
    files: list[tuple[int, str]] = []
    written = 0
    channel_index = 0
    while written < count:
        channel = str(uuid.UUID(bytes=secrets.token_bytes(16), version=4))
        base = f"data/channels/{channel}"
        mark += 1
        chunks.append(_blob(mark, _channel_md(f"bench-{channel_index}")))
        files.append((mark, f"{base}/CHANNEL.md"))
        channel_index += 1
        for i in range(min(MESSAGES_PER_CHANNEL, count - written)):
            when = start + timedelta(seconds=written * 7 + i)
            name = f"{when:%Y/%m/%d/%H%M%S}{when.microsecond // 1000:03d}Z-{secrets.token_hex(8)}.md"
            is_reply = i % 2 == 1
            msg = BusMessage(
                sender="bench/echo@elsewhere" if is_reply else "operator",
                to="operator" if is_reply else "bench/echo@elsewhere",
                timestamp=f"{when:%Y-%m-%dT%H:%M:%S}.000Z",
                re=(files[-1][1].removeprefix(base + "/"),) if is_reply else (),
                body=f"message {written} in {channel}",
            )
            mark += 1
            chunks.append(_blob(mark, render_message(msg).encode()))
            files.append((mark, f"{base}/{name}"))
            written += 1
    stamp = int(datetime.now(UTC).timestamp())
    commit = [
        f"commit refs/heads/{branch}\n".encode(),
        f"committer bench <bench@crosstalk.invalid> {stamp} +0000\n".encode(),
        _data(f"bench: {count} messages\n".encode()),
        f"from refs/heads/{branch}^0\n".encode(),
    ]
    commit += [f"M 100644 :{m} {path}\n".encode() for m, path in files]
    stream = b"".join(chunks) + b"".join(commit) + b"done\n"
    git(root, "fast-import", "--quiet", "--done", stdin=stream)
    return written


def _blob(mark: int, data: bytes) -> bytes:
    return b"blob\n" + f"mark :{mark}\n".encode() + _data(data)


def _data(data: bytes) -> bytes:
    return f"data {len(data)}\n".encode() + data + b"\n"


def build_transport(tmp: Path, name: str, count: int, env: dict[str, str]) -> tuple[Path, Path]:
    """A bare remote holding a transport with `count` messages, and a checked-out clone registered on this
    machine. Returns (remote, clone root)."""
    remote = tmp / f"{name}.git"
    seed = tmp / f"{name}-seed"
    git(tmp, "init", "--bare", "-q", "--initial-branch=main", str(remote))
    cli(["transport", "init", f"{name}-seed", "--dir", str(seed), "--remote", str(remote)], env)
    fast_import_messages(remote, count)
    clone = tmp / name
    cli(["transport", "clone", str(remote), "--dir", str(clone), "--name", name], env, timeout=GIT_TIMEOUT_S)
    return remote, clone


if __name__ == "__main__":  # a quick manual check: python bench/bus_fixture.py DIR COUNT
    target, n = Path(sys.argv[1]), int(sys.argv[2])
    target.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CROSSTALK_HOME=str(target / "home"))
    print(build_transport(target, "fixture", n, env))
