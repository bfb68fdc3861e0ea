"""The owning dispatcher's side of a workflow: compile → fanout → synthesize → route, one commit per step.

A marker (`type: workflow`, `to: workflow`, `dispatch_host: <our alias>`) is adopted when the scan meets it and kept
in the machine-local `workflows.json` until its child channel holds COMPLETE. Each tick with new commits advances
every open workflow from what the transport shows (crosstalk.bus.workflow.progress), so a crash at any stage
resumes where the history says it stands, with nothing written twice:
- compile: the first model this machine claims answers the fixed compile prompt; the plan, validated strictly, is
  committed as the child channel's PLAN.json (its existence guards a second compile);
- fanout: all `count` copies in one commit, `to: <model>@<machine>` round-robin over the machines known to claim the
  model (this one, and those whose replies from that model the scans have seen: learned from the history, kept
  machine-local, nothing in the repository);
- synthesize: once every copy is answered, one message (the synthesis body and the candidates) to one machine;
- route: the synthesis answer as the reply to the marker in the parent channel, to the marker's `from:`, wearing its
  `wake_as`, committed together with COMPLETE.
An invalid plan, a model nobody is known to claim, or a failed copy or synthesis ends the workflow with a
`failed: true` reply saying why.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from crosstalk.bus.errors import BusError, Interrupted, PlanError
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.addressing import WORKFLOW_ADDRESS, split_address
from crosstalk.bus.protocol.message import (
    MAX_BODY_BYTES,
    BusMessage,
    fit_body,
    new_message_name,
    render_message,
    utc_timestamp,
)
from crosstalk.bus.protocol.models import ModelSpec
from crosstalk.bus.runs.claimers import parse_claimers, placed
from crosstalk.bus.runs.invoke import run_model
from crosstalk.bus.runs.reader import ScannedMessage
from crosstalk.bus.transport.state import read_json, write_json_atomic
from crosstalk.bus.transport.store import publish, read_message
from crosstalk.bus.transport.transports import Transport
from crosstalk.bus.workflow.plan import Plan, compile_prompt, parse_plan_output
from crosstalk.bus.workflow.progress import COMPLETE_FILE, FAILURE_CHARS, Progress, engine_name, read_progress

Log = Callable[..., None]


class WorkflowEngine:
    def __init__(
        self,
        transport: Transport,
        state_path: Path,
        *,
        claimed: Callable[[], Sequence[ModelSpec]],
        environ: Mapping[str, str],
        log: Log,
        error: Log,
        cancel: threading.Event,
        model_timeout: float | None = None,
    ) -> None:
        self.transport = transport
        self.root = Path(transport.root)
        self.alias = transport.alias
        self.engine = engine_name(self.alias)
        self.path = state_path
        self.claimed = claimed
        self.environ = environ
        self.log, self.error = log, error
        self.cancel = cancel
        self.model_timeout = model_timeout
        raw = read_json(state_path)
        raw = raw if isinstance(raw, dict) else {}
        self.open: list[str] = [m for m in raw.get("open", []) if isinstance(m, str)]
        self.claimers: dict[str, list[str]] = parse_claimers(raw.get("claimers"))
        failing = raw.get("failing")
        self.failing: dict[str, str] = {  # marker -> why it failed, until that is committed
            m: r for m, r in (failing.items() if isinstance(failing, dict) else ()) if isinstance(r, str)
        }

    # ------------------------------------------------------------------ what the scans bring
    def learn(self, messages: Sequence[ScannedMessage]) -> None:
        """Adopt our markers; remember which machine answered as which model (replies' `from: key@alias`)."""
        changed = False
        for item in messages:
            msg = item.msg
            if msg.type == "workflow" and msg.to == WORKFLOW_ADDRESS and msg.dispatch_host == self.alias:
                if item.path not in self.open:
                    self.open.append(item.path)
                    changed = True
            elif msg.re and not msg.failed:
                key, machine = split_address(msg.sender)
                if machine and key != WORKFLOW_ADDRESS and machine not in self.claimers.get(key, []):
                    self.claimers.setdefault(key, []).append(machine)
                    changed = True
        if changed:
            self._save()

    def advance_all(self) -> None:
        """Advance every open workflow. One that breaks (anything but a git or file error, which a later tick
        retries) fails on its own, with the reason in its reply, and the others go on."""
        for marker_rel in list(self.open):
            if self.cancel.is_set():
                return
            try:
                reason = self.failing.get(marker_rel)
                done = self.advance(marker_rel) if reason is None else self._fail(marker_rel, reason)
            except Interrupted:
                return
            except BusError as exc:
                self.error("workflow_error", marker=marker_rel, error=exc.message)
                continue
            except Exception as exc:  # hostile content or a bug: this workflow fails, never the tick
                reason = f"the workflow broke: {type(exc).__name__}: {exc}"
                self.error("workflow_error", marker=marker_rel, error=reason)
                done = self._settle(marker_rel, reason)
            if done:
                self.open.remove(marker_rel)
                self.failing.pop(marker_rel, None)
                self._save()

    def _settle(self, marker_rel: str, reason: str) -> bool:
        """Fail the workflow now; when even that cannot be committed, remember the reason (machine-local) so the
        next ticks only retry the failed reply and never run its steps (the compile model) again."""
        try:
            return self._fail(marker_rel, reason)
        except Exception as exc:
            self.error("workflow_error", marker=marker_rel, error=f"cannot record its failure: {exc}")
            self.failing[marker_rel] = reason
            self._save()
            return False

    def _fail(self, marker_rel: str, reason: str) -> bool:
        marker = read_message(self.root, marker_rel)
        if marker is None or marker.type != "workflow":
            self.error("workflow_error", marker=marker_rel, error="the marker is gone or unreadable")
            return True
        return self._finish(Progress(marker_rel, marker), None, reason)

    # ------------------------------------------------------------------ one workflow
    def advance(self, marker_rel: str) -> bool:
        """One step further, if the transport allows one now; True once the workflow is complete (or gone)."""
        marker = read_message(self.root, marker_rel)
        if marker is None or marker.type != "workflow":
            self.error("workflow_error", marker=marker_rel, error="the marker is gone or unreadable")
            return True
        p = read_progress(self.root, marker_rel, marker, self.engine)
        if p.complete:
            return True
        if p.plan_error is not None:
            return self._finish(p, None, p.plan_error)
        if p.plan is None:
            return self._compile(p)
        if not p.subs:
            return self._fan_out(p, p.plan)
        if len(p.sub_replies) < len(p.subs):
            return False  # copies still running
        failures = p.failures()
        if failures:
            return self._finish(p, None, "; ".join(failures))
        if p.synthesis is None:
            return self._synthesize(p, p.plan)
        if p.synthesis_reply is None:
            return False
        if p.synthesis_reply.msg.failed:
            return self._finish(p, None, "; ".join(p.failures()))
        return self._finish(p, p.synthesis_reply.msg.body.strip(), None)

    def _compile(self, p: Progress) -> bool:
        claimed = list(self.claimed())
        if not claimed:
            return self._finish(p, None, f"machine {self.alias} claims no model to compile the workflow with")
        spec = claimed[0]
        models = sorted({s.key for s in claimed} | set(self.claimers))
        out, failure = run_model(
            spec, compile_prompt(p.marker.body, models), root=self.root, alias=self.alias, channel=p.child,
            environ=self.environ, timeout=self.model_timeout, cancel=self.cancel, log=self.log, error=self.error,
        )  # fmt: skip
        if failure is not None:
            return self._finish(p, None, f"the compile run failed: {failure}")
        try:
            plan = parse_plan_output(out)
        except PlanError as exc:
            return self._finish(p, None, f"invalid plan from {spec.key}: {exc.message}")
        rel = f"{layout.CHANNELS_DIR}/{p.child}/{layout.PLAN_FILE}"
        publish(self.transport, {rel: json.dumps(plan.to_dict(), indent=1) + "\n"}, f"crosstalk: workflow plan ({rel})")
        self.log("workflow_compiled", marker=p.marker_rel, model=spec.key, fanout=plan.fanout.count)
        return self.advance(p.marker_rel)

    def _fan_out(self, p: Progress, plan: Plan) -> bool:
        targets = self._placed(plan.fanout.to)
        if not targets:
            return self._finish(p, None, f"no machine is known to claim {plan.fanout.to!r}")
        n = plan.fanout.count
        files = {}
        for k in range(1, n + 1):
            to = targets[(k - 1) % len(targets)]
            msg = BusMessage(sender=self.engine, to=to, timestamp=utc_timestamp(), fanout=f"{k}/{n}",
                             workflow_step="fanout", body=plan.fanout.body)  # fmt: skip
            files[f"{layout.CHANNELS_DIR}/{p.child}/{new_message_name()}"] = render_message(msg)
        publish(self.transport, files, f"crosstalk: workflow fanout ({n} to {plan.fanout.to})")
        self.log("workflow_fanout", marker=p.marker_rel, n=n, to=",".join(sorted(set(targets))))
        return False

    def _synthesize(self, p: Progress, plan: Plan) -> bool:
        targets = self._placed(plan.synthesize.to)
        if not targets:
            return self._finish(p, None, f"no machine is known to claim {plan.synthesize.to!r}")
        # Every candidate gets an equal share of what one message may hold, so the synthesis is never too large
        # to be read (16 answers of 1 MiB each would be).
        share = max(1024, (MAX_BODY_BYTES - len(plan.synthesize.body.encode()) - 256 * len(p.subs)) // len(p.subs))
        candidates = "\n\n".join(
            f"--- Candidate {i} of {len(p.subs)} ---\n{_cut(p.sub_replies[c.rel].msg.body.strip(), share)}"
            for i, c in enumerate(p.subs, 1)
        )
        msg = BusMessage(sender=self.engine, to=targets[0], timestamp=utc_timestamp(), workflow_step="synthesize",
                         body=f"{plan.synthesize.body}\n\n{candidates}")  # fmt: skip
        rel = f"{layout.CHANNELS_DIR}/{p.child}/{new_message_name()}"
        publish(self.transport, {rel: render_message(msg)}, f"crosstalk: workflow synthesis to {targets[0]}")
        self.log("workflow_synthesize", marker=p.marker_rel, to=targets[0])
        return False

    def _finish(self, p: Progress, answer: str | None, failure: str | None) -> bool:
        """The reply to the marker in its channel and COMPLETE in the child channel (`complete`, or `failed: <why>`
        for `workflow status`), in one commit. The reason is one line, bounded: it may quote files others wrote."""
        if failure is not None:
            failure = " ".join(failure.split())[:FAILURE_CHARS] or "failed"
        elif answer is not None:
            answer = _cut(answer, MAX_BODY_BYTES - 256)  # an answer read from another machine's reply
        parent = p.marker_rel.split("/")[2]
        marker_in_channel = "/".join(p.marker_rel.split("/")[3:])
        reply = BusMessage(sender=self.engine, to=p.marker.sender, timestamp=utc_timestamp(), re=(marker_in_channel,),
                           as_=p.marker.wake_as, workflow_step="result", failed=failure is not None, error=failure,
                           body=(answer or "") if failure is None else f"the workflow failed: {failure}")  # fmt: skip
        files = {f"{layout.CHANNELS_DIR}/{parent}/{new_message_name()}": render_message(reply)}
        if p.child:
            done = f"failed: {failure}\n" if failure else "complete\n"
            files[f"{layout.CHANNELS_DIR}/{p.child}/{COMPLETE_FILE}"] = done
        try:
            publish(
                self.transport, files, f"crosstalk: workflow {'failed' if failure else 'complete'} ({p.marker_rel})"
            )
        except BusError:
            if failure is not None:  # the next ticks retry this reply only, never the workflow's steps
                self.failing[p.marker_rel] = failure
                self._save()
            raise
        self.log("workflow_done", "warn" if failure else "info", marker=p.marker_rel, failed=bool(failure),
                 error=failure or "-")  # fmt: skip
        return True

    # ------------------------------------------------------------------ placement
    def _placed(self, model: str) -> list[str]:
        """`key@machine` addresses of the machines known to claim `model`, this one first."""
        return placed(model, list(self.claimed()), self.claimers, self.alias)

    def _save(self) -> None:
        write_json_atomic(self.path, {"open": self.open, "claimers": self.claimers, "failing": self.failing})


def _cut(text: str, limit: int) -> str:
    """`text` within `limit` bytes (and a note), saying so when it was cut."""
    kept, dropped = fit_body(text, limit)
    return kept + (
        f"\n[crosstalk: this text was cut at {limit} bytes; {dropped} more bytes dropped]" if dropped else ""
    )
