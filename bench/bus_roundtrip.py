"""The git bus send -> reply round trip with an instant model on a local bare remote, beside same-run floors.

    .venv/bin/python bench/bus_roundtrip.py [--quick] [-n N]

Sets up, in a temp dir: a bare remote, `crosstalk transport init bench --remote <bare>`, a channel, and a models
registry (data/crosstalk.yaml, committed and pushed) with one instant model, an executable `#!/bin/sh` script by
absolute path that prints "pong". Starts the real dispatcher, `python -m crosstalk daemon dispatch --transport ROOT
--interval 30`, so only the wake that `message send` sends triggers a tick (the product path). Then N times (30;
--quick 10): run `crosstalk message send --to bench/pong ...` as a fresh process and poll the reply in-process with
crosstalk.bus.transport.store.replies_status until it is REPLIED; the round trip is from just before the send to
the reply seen. Before the next send, it waits until the reply is pushed and the dispatcher has settled (its cursor
at the remote's head), so each sample starts from an idle bus. Target (docs/performance.md): median round trip <= 1.5 s.

Baselines, interleaved with the round trips: (a) the floor of bench/floor.py (unix-socket round trip to a process that
fsyncs); (b) the git floor, `git add` + `git commit` of a new small file + `git push` to the same bare remote (another
branch, from a second clone), each a subprocess timed the same way; (c) the CLI's own start-up,
`python -m crosstalk version`. The breakdown per round trip comes from the send's own wall time and the
dispatcher's log (`dispatch ... duration=` is the model run, `tick ... duration=` the whole tick).

Every crosstalk process runs with a bytecode cache in the temp dir (as an installed wheel would).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    emit_result,
    exit_on_sigterm,
    figure,
    make_tmp,
    ms,
    print_bytecode_env,
    print_machine,
    pyc_env,
    remove_tmp,
    stats,
    stop_process,
    timed_run,
    versus,
)
from bus_fixture import cli, git, read_json, remote_head, wait_for
from floor import FloorServer, measure

TARGET_S = 1.5
NAME = "bench"
MODEL = "bench/pong"
POLL_S = 0.002
REPLY_TIMEOUT_S = 30.0
SETTLE_TIMEOUT_S = 10.0
IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@crosstalk.invalid"]
LOG_DURATION = re.compile(r" (dispatch|tick) .*duration=([0-9.]+)")


def registry_yaml(model_path: Path) -> str:
    return f"providers:\n  bench:\n    timeout: 30\n    models:\n      pong: {model_path}\n"


class Bus:
    """The transport, its bare remote, the dispatcher process and the in-process reply poller."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env
        self.bare = tmp / "remote.git"
        self.root = tmp / NAME
        self.proc: subprocess.Popen | None = None
        self._stderr = None
        self.transport: Any = None
        self.state: Any = None
        self.log_pos = 0

    def setup(self) -> None:
        from crosstalk.bus.transport.transports import resolve_transport

        git(self.tmp, "init", "--bare", "-q", "--initial-branch=main", str(self.bare))
        cli(["transport", "init", NAME, "--dir", str(self.root), "--remote", str(self.bare)], self.env)
        cli(["channel", "create", "rt", "--transport", str(self.root)], self.env)
        model = self.tmp / "pong.sh"
        model.write_text("#!/bin/sh\necho pong\n")
        model.chmod(0o755)
        (self.root / "data" / "crosstalk.yaml").write_text(registry_yaml(model))
        git(self.root, "add", "data/crosstalk.yaml")
        git(self.root, *IDENTITY, "commit", "-q", "-m", "bench: the instant model")
        git(self.root, "push", "-q", "origin", "HEAD:main")
        self.transport = resolve_transport(self.root, str(self.root), environ=self.env)
        self.state = self.transport.state(self.env)

    def start_dispatcher(self) -> None:
        cmd = [PYTHON, "-m", "crosstalk", "daemon", "dispatch", "--transport", str(self.root), "--interval", "30"]
        self._stderr = open(self.tmp / "dispatcher.stderr", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr
        )
        try:
            wait_for(self._booted, 30.0, "the dispatcher's first tick")
        except RuntimeError:
            err = (self.tmp / "dispatcher.stderr").read_text(errors="replace").strip()
            raise RuntimeError(f"the dispatcher did not start (exit {self.proc.poll()}): {err[-500:]}") from None

    def _booted(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"the dispatcher exited {self.proc.returncode}")
        hb = read_json(self.state.heartbeat)
        return hb.get("ticks", 0) >= 1 and MODEL in hb.get("claimed", []) and self.settled()

    def settled(self) -> bool:
        """The dispatcher's cursor is at the remote's head: nothing left for it to scan or push."""
        return read_json(self.state.heartbeat).get("cursor") == remote_head(self.bare)

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def new_log_durations(self) -> dict[str, float]:
        """`dispatch` (model run) and `tick` durations logged since the last call."""
        try:
            with open(self.state.log, "rb") as fh:
                fh.seek(self.log_pos)
                data = fh.read()
        except FileNotFoundError:
            return {}
        self.log_pos += len(data)
        out: dict[str, float] = {}
        for line in data.decode(errors="replace").splitlines():
            m = LOG_DURATION.search(line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
        return out

    def round_trip(self, i: int) -> dict[str, float]:
        """One send -> reply; seconds of: the whole round trip, the send CLI, reply pushed, model run, tick."""
        from crosstalk.bus.transport.store import REPLIED, replies_status

        self.new_log_durations()
        before = remote_head(self.bare)
        send = ["message", "send", "--to", MODEL, "--from", "operator", "--transport", str(self.root), f"ping {i}"]
        t0 = time.perf_counter()
        out = cli(send, self.env, timeout=60)
        t_send = time.perf_counter() - t0
        rel = out.strip().splitlines()[-1]
        sent = remote_head(self.bare)
        if sent == before:
            raise RuntimeError(f"message send did not push (it printed {rel!r})")
        t_reply = t_pushed = None
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while t_reply is None or t_pushed is None:
            now = time.perf_counter() - t0
            if t_reply is None and replies_status(self.transport, [rel])[0].state == REPLIED:
                t_reply = now
            if t_pushed is None and remote_head(self.bare) != sent:
                t_pushed = now
            if time.monotonic() > deadline:
                raise RuntimeError(f"no reply to {rel} within {REPLY_TIMEOUT_S:.0f} s")
            time.sleep(POLL_S)
        wait_for(self.settled, SETTLE_TIMEOUT_S, "the dispatcher to settle after the reply")
        logged = self.new_log_durations()
        return {
            "round_trip": t_reply,
            "send": t_send,
            "pushed": t_pushed,
            "model": logged.get("dispatch", float("nan")),
            "tick": logged.get("tick", float("nan")),
        }


class GitFloor:
    """`git add` + `git commit` + `git push` of one new small file, from a second clone of the same bare remote to
    a branch of its own (so the transport's main never diverges)."""

    def __init__(self, tmp: Path, bare: Path) -> None:
        self.root = tmp / "gitfloor"
        git(tmp, "clone", "-q", str(bare), str(self.root))
        self.n = 0

    def sample(self) -> float:
        self.n += 1
        name = f"floor-{self.n}.md"
        (self.root / name).write_text(f"floor sample {self.n}\n")
        push = ["push", "-q", "origin", "HEAD:refs/heads/floor"]
        steps = (["add", "--", name], [*IDENTITY, "commit", "-q", "-m", name], push)
        return sum(timed_run(["git", "-C", str(self.root), *args]) for args in steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 round trips")
    ap.add_argument("-n", type=int, default=None, help="round trips (default 30, quick 10)")
    args = ap.parse_args()
    exit_on_sigterm()
    n = args.n or (10 if args.quick else 30)
    print_machine()
    print_bytecode_env()
    print(f"bus_roundtrip: {n} x `message send` -> reply from an instant model, dispatcher woken by the send")
    tmp = make_tmp()
    bus: Bus | None = None
    samples: list[dict[str, float]] = []
    floor_rt: list[float] = []
    git_floor: list[float] = []
    version: list[float] = []
    try:
        env = pyc_env(dict(os.environ, CROSSTALK_HOME=str(tmp / "home")), tmp)
        os.environ["CROSSTALK_HOME"] = env["CROSSTALK_HOME"]  # the in-process poller reads the same state root
        bus = Bus(tmp, env)
        bus.setup()
        version_cmd = [PYTHON, "-m", "crosstalk", "version"]
        timed_run(version_cmd, env)  # fills the bytecode cache
        bus.start_dispatcher()
        gf = GitFloor(tmp, bus.bare)
        with FloorServer(fsync=True, tmp=tmp) as fs:
            measure(fs.sock_path, 50)
            bus.round_trip(-1)  # warm-up: page cache, the model script, the dispatcher's first dispatch
            gf.sample()
            for i in range(n):
                samples.append(bus.round_trip(i))
                floor_rt += measure(fs.sock_path, 20)
                git_floor.append(gf.sample())
                version.append(timed_run(version_cmd, env))
    finally:
        if bus is not None:
            bus.stop()
        remove_tmp(tmp)

    rt = stats([s["round_trip"] for s in samples])
    parts = {k: stats([s[k] for s in samples]) for k in ("send", "pushed", "model", "tick")}
    f, g, v = stats(floor_rt), stats(git_floor), stats(version)
    passed = rt["p50"] <= TARGET_S
    print(
        f"  round trip (send -> reply seen)     p50 {ms(rt['p50'])}  p90 {ms(rt['p90'])}  "
        f"target p50 <= {TARGET_S * 1e3:.0f} ms: {'PASS' if passed else 'MISS'}"
    )
    print(f"  round trip until the reply is pushed p50 {ms(parts['pushed']['p50'])}  p90 {ms(parts['pushed']['p90'])}")
    print("  breakdown (p50):")
    print(f"    `message send` process (commit + push + wake)  {ms(parts['send']['p50'])}")
    print(f"    dispatcher tick (fetch, scan, run, commit, push) {ms(parts['tick']['p50'])}")
    print(f"      of which the model run                       {ms(parts['model']['p50'])}")
    rest = rt["p50"] - parts["send"]["p50"]
    print(f"    send returned -> reply seen                     {ms(rest)}")
    print("  baselines (same run, interleaved):")
    print(f"    (a) floor: unix socket + fsync round trip      p50 {ms(f['p50'])}")
    print(f"    (b) git floor: add + commit + push            p50 {ms(g['p50'])}  p90 {ms(g['p90'])}")
    print(f"    (c) CLI start-up `crosstalk version`          p50 {ms(v['p50'])}")
    print(
        f"  round trip / git floor = {rt['p50'] / g['p50']:.1f}x; "
        f"round trip / (2 x git floor + 2 x CLI start) = {rt['p50'] / (2 * g['p50'] + 2 * v['p50']):.2f}x"
    )
    emit_result(
        "bus_roundtrip",
        [
            versus(
                "bus round trip p50",
                rt["p50"],
                g["p50"],
                "ms",
                "git add+commit+push p50",
                target=f"<= {TARGET_S * 1e3:.0f} ms",
                passed=passed,
                summary=(
                    f"p90 {rt['p90'] * 1e3:.0f} ms; floor {f['p50'] * 1e6:.0f} us; CLI start {v['p50'] * 1e3:.0f} ms"
                ),
            ),
            versus("bus round trip p90", rt["p90"], g["p90"], "ms", "git add+commit+push p90"),
            versus("`message send` wall p50", parts["send"]["p50"], v["p50"], "ms", "`crosstalk version` p50"),
            versus(
                "dispatcher tick with one dispatch p50", parts["tick"]["p50"], g["p50"], "ms", "git add+commit+push p50"
            ),
            figure("floor (unix socket + fsync) p50", f["p50"] * 1e6, "us"),
        ],
        {
            "n": n,
            "round_trip_s": rt,
            "breakdown_s": parts,
            "floor_s": f,
            "git_floor_s": g,
            "cli_start_s": v,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
