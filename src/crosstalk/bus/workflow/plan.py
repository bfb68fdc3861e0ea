"""A workflow's plan: what the compile pass asks a model for, and the strict reading of its answer.

The plan is `{"fanout": {"to", "count", "body"}, "synthesize": {"to", "body"}}`: `count` copies of the fanout body
go to the fanout model, and once every copy is answered the synthesis model gets its body followed by the
candidates. Models are named as `to:` names them, without `@machine` (the runtime places the work).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from crosstalk.bus.errors import PlanError
from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import loads

MAX_PLAN_BYTES = 256 << 10  # two bodies of MAX_BODY_CHARS, escaped, with room to spare

MAX_COUNT = 16
MAX_BODY_CHARS = 32 * 1024
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(/[A-Za-z0-9][A-Za-z0-9._-]{0,63})?$")

COMPILE_PROMPT = """You compile a workflow described in prose into a JSON plan. Answer with the JSON object only.

The plan has exactly this shape:
{"fanout": {"to": "<model>", "count": <1-16>, "body": "<the task each copy gets>"},
 "synthesize": {"to": "<model>", "body": "<how to combine the candidates>"}}

<model> is a model name such as "sonnet" or "provider/model", exactly as the workflow names it. Models available
on the bus: {models}. The fanout body is the whole task, self-contained. The synthesis body says how to combine;
the candidates are appended to it.

The workflow:
{prose}
"""


@dataclass(frozen=True, slots=True)
class Step:
    to: str
    body: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class Plan:
    fanout: Step
    synthesize: Step

    def to_dict(self) -> dict[str, Any]:
        return {
            "fanout": {"to": self.fanout.to, "count": self.fanout.count, "body": self.fanout.body},
            "synthesize": {"to": self.synthesize.to, "body": self.synthesize.body},
        }

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """Strict: exactly the plan's keys, each of its type and within its bounds; PlanError naming the problem."""
        if not isinstance(data, dict) or set(data) != {"fanout", "synthesize"}:
            raise PlanError("the plan must be an object with exactly the keys fanout and synthesize")
        return cls(_step(data["fanout"], "fanout", counted=True), _step(data["synthesize"], "synthesize"))


def _step(data: Any, name: str, *, counted: bool = False) -> Step:
    keys = {"to", "count", "body"} if counted else {"to", "body"}
    if not isinstance(data, dict) or set(data) != keys:
        raise PlanError(f"plan.{name} must be an object with exactly the keys {', '.join(sorted(keys))}")
    to, body = data["to"], data["body"]
    if not isinstance(to, str) or not _MODEL_RE.match(to):
        raise PlanError(f"plan.{name}.to must be a model name (MODEL or PROVIDER/MODEL), not {str(to)[:60]!r}")
    if not isinstance(body, str) or not body.strip() or len(body) > MAX_BODY_CHARS:
        raise PlanError(f"plan.{name}.body must be non-empty text of at most {MAX_BODY_CHARS} characters")
    count = 1
    if counted:
        count = data["count"]
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            raise PlanError(f"plan.{name}.count must be a whole number from 1 to {MAX_COUNT}, not {count!r:.60}")
    return Step(to, body.strip(), count)


def compile_prompt(prose: str, models: list[str]) -> str:
    return COMPILE_PROMPT.replace("{models}", ", ".join(models) or "(none listed)").replace("{prose}", prose.strip())


def parse_plan_output(text: str) -> Plan:
    """The plan in a model's answer: the JSON object it holds (a ```json fence or prose around it is allowed);
    PlanError when there is none or it is not a valid plan (too large or too deep included)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise PlanError("the compile answer holds no JSON object")
    return parse_plan_json(text[start : end + 1], "the compile answer")


def parse_plan_json(raw: str | bytes, what: str) -> Plan:
    """A plan from JSON someone else wrote (a model's answer, a committed PLAN.json), read through the one rule for
    untrusted input (crosstalk.core.untrusted); PlanError naming `what` and the problem."""
    try:
        data = loads(raw, what=what, max_bytes=MAX_PLAN_BYTES)
    except UntrustedInput as exc:
        raise PlanError(str(exc)) from None
    return Plan.from_dict(data)
