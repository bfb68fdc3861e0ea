"""The dispatcher's side of the bridge to live agents: deliver `to: NAME@<alias>` messages into live sessions,
hold the ones whose agent is down (crosstalk.bus.live.held), and offer the held ones again every tick."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from crosstalk.bus.errors import BusError
from crosstalk.bus.live.held import HOLD_S, Held, HeldMessages, release
from crosstalk.bus.protocol.layout import CHANNELS_DIR
from crosstalk.bus.protocol.safefs import MESSAGE_LIMIT, read_transport_text
from crosstalk.bus.runs.reader import ScannedMessage
from crosstalk.bus.runs.scan import LiveDelivery, Rejection
from crosstalk.core.states import DELIVERED_STATES

if TYPE_CHECKING:
    from crosstalk.bus.dispatch.eventlog import EventLog
    from crosstalk.bus.dispatch.tickreport import TickReport
    from crosstalk.bus.transport.transports import Transport
    from crosstalk.registry.paths import StatePaths

Reject = Callable[[list[Rejection], "TickReport"], bool]  # commits failed replies; False when the commit failed


class LiveRelay:
    def __init__(self, transport: Transport, paths: StatePaths, held: HeldMessages, log: EventLog) -> None:
        self.transport = transport
        self.paths = paths
        self.alias = transport.alias
        self.held = held
        self.log = log

    def live_agent(self, name: str) -> str | None:
        from crosstalk.bus.live.bridge import live_agent_name

        return live_agent_name(self.paths, name)

    def known_agent(self, name: str) -> bool:
        """Whether an agent of this name has registered on this machine, live or not: its name's lock file stays
        after it exits (registry/registration.py claims a name by locking names/<name>.lock)."""
        from crosstalk.registry.names import is_valid_name

        return is_valid_name(name) and self.paths.name_lock(name).exists()

    def route(self, live: list[LiveDelivery], down: list[LiveDelivery], report: TickReport, reject: Reject) -> None:
        """Deliver what the scan found for live agents; hold what is for agents that are down (and what a live
        agent's socket did not answer). A new task the agent refuses gets a failed reply so its sender learns
        why."""
        failures: list[Rejection] = []
        hold = [_held_of(d.item, d.agent) for d in down]
        for d in live:
            state, reason = self._deliver(d.item, d.agent)
            report.bridged += state in DELIVERED_STATES
            if state == "unreachable":
                hold.append(_held_of(d.item, d.agent))
            elif state == "rejected" and not d.item.msg.re:
                error = f"live agent {d.agent} on {self.alias}: rejected ({reason or 'no reason given'})"
                item = d.item
                failures.append(_rejection(item.channel, item.rel, item.msg.sender, item.msg.to, d.agent, error))
        for h in hold:
            self.log("held", "warn", path=_path(h), agent=h.agent, reason="the agent is not running")
        full = self.held.hold(hold)
        failures += [self._given_up(h, f"{len(self.held)} messages already wait on this machine") for h in full]
        if failures and not reject(failures, report):
            report.incomplete += 1

    def release(self, report: TickReport, reject: Reject) -> None:
        """Offer the held messages whose agent is live again; give up those held past HOLD_S."""

        def deliver(h: Held, agent: str) -> str:
            try:
                from crosstalk.bus.protocol.message import parse_message

                msg = parse_message(read_transport_text(self.transport.root, _path(h), MESSAGE_LIMIT), where=_path(h))
            except (OSError, ValueError, BusError) as exc:  # unreadable now (rewritten since it was held): refused
                self.log("held_unreadable", "warn", path=_path(h), error=str(exc))
                return "rejected"
            state, _ = self._deliver(ScannedMessage(h.channel, h.rel, msg), agent)
            report.bridged += state in DELIVERED_STATES
            return state

        def give_up(expired: list[Held]) -> bool:
            tasks = [h for h in expired if not h.is_reply]
            for h in expired:
                self.log("held_expired", "warn", path=_path(h), agent=h.agent, held_s=f"{time.time() - h.since:.0f}")
            why = f"did not come back within {HOLD_S / 3600:g} h"
            return not tasks or reject([self._given_up(h, why) for h in tasks], report)

        release(self.held, self.live_agent, deliver, give_up)

    def _deliver(self, item: ScannedMessage, agent: str) -> tuple[str, str | None]:
        from crosstalk.bus.live.bridge import deliver_live

        try:
            out = deliver_live(self.paths, self.transport, item.channel, item.rel, item.msg, agent)
        except Exception as exc:  # one message that breaks the bridge is refused with the reason; the rest go on
            reason = f"crosstalk could not deliver it ({type(exc).__name__}: {exc})"
            self.log("bridge_failed", "warn", path=item.path, agent=agent, state="rejected", reason=reason)
            return "rejected", reason
        delivered = out.state in DELIVERED_STATES
        fields = {"path": item.path, "agent": agent, "state": out.state, "reason": out.reason or "-"}
        self.log("bridged" if delivered else "bridge_failed", "info" if delivered else "warn", **fields)
        return out.state, out.reason

    def _given_up(self, h: Held, why: str) -> Rejection:
        error = f"live agent {h.agent} on {self.alias} is not running and {why}"
        return _rejection(h.channel, h.rel, h.sender, h.to, h.agent, error)


def _held_of(item: ScannedMessage, agent: str) -> Held:
    msg = item.msg
    return Held(item.channel, item.rel, agent, msg.sender, msg.to, bool(msg.re), time.time())


def _rejection(channel: str, rel: str, sender: str, to: str, agent: str, error: str) -> Rejection:
    return Rejection(channel, (rel,), sender, to, agent, error)


def _path(h: Held) -> str:
    return f"{CHANNELS_DIR}/{h.channel}/{h.rel}"
