"""Which machines are known to claim a model: this one (the registry's models whose program is on its PATH), those
whose replies this machine's dispatcher has seen (`from: key@machine`, learned from the history and kept
machine-local in its workflows.json), and the machine whose `model add` said it claimed the model (the commit
subject: no file in the repository says who claims what).

The workflow engine places fanout copies and syntheses with `placed`; `message send` asks `known_claimer` before
it commits a message that no machine would ever answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from crosstalk.bus.errors import GitError, ModelError
from crosstalk.bus.protocol.addressing import split_address
from crosstalk.bus.protocol.layout import REGISTRY_FILE
from crosstalk.bus.protocol.models import ModelSpec, resolve
from crosstalk.bus.transport.state import read_json
from crosstalk.bus.transport.transports import Transport

STATE_FILE = "workflows.json"  # in the transport's machine-local state dir: {"open": [...], "claimers": {...}}
HOW_MACHINES_CLAIM = (
    "a machine claims the models of data/crosstalk.yaml whose program is on its PATH; add one with 'crosstalk model "
    "add PROVIDER/NAME -- COMMAND...', and 'crosstalk model list' shows what this machine claims"
)


ADD_SUBJECT = re.compile(r"^crosstalk: model add (\S{1,200}) \(claimed by ([A-Za-z0-9][A-Za-z0-9._-]{0,63})\)$")
REMOVE_SUBJECT = re.compile(r"^crosstalk: model (?:add|remove) (\S{1,200})")
LOG_DEPTH = 200  # registry commits read for claims: the newest edits of data/crosstalk.yaml


def add_summary(key: str, claimed_by: str | None) -> str:
    """The commit subject of `model add KEY`: it says which machine claimed the model when it was added, so the
    others know before that machine first answers as it (committed_claims)."""
    return f"crosstalk: model add {key}" + (f" (claimed by {claimed_by})" if claimed_by else "")


def committed_claims(subjects: list[str]) -> dict[str, list[str]]:
    """model key -> the machines whose `model add` said they claimed it, from the registry's commit subjects,
    newest first: an add or remove of the key after (newer than) the claim voids it."""
    out: dict[str, list[str]] = {}
    settled: set[str] = set()
    for subject in subjects:
        claim = ADD_SUBJECT.match(subject)
        if claim is not None and claim.group(1) not in settled:
            out.setdefault(claim.group(1), []).append(claim.group(2))
        edit = REMOVE_SUBJECT.match(subject)
        if edit is not None:
            settled.add(edit.group(1))
    return out


def known_claimers(transport: Transport) -> dict[str, list[str]]:
    """model key -> machines: what this machine's dispatcher learned from replies, and what the registry's newest
    commits say (none when git cannot say)."""
    out = load_claimers(transport.state().dir)
    try:
        log = transport.git().run("log", f"-n{LOG_DEPTH}", "--format=%s", "--", REGISTRY_FILE)
    except GitError:
        return out
    for key, machines in committed_claims(log.splitlines()).items():
        out[key] = sorted({*out.get(key, []), *machines})
    return out


def parse_claimers(raw: object) -> dict[str, list[str]]:
    """model key -> machine aliases, from the `claimers` of workflows.json (anything malformed left out)."""
    if not isinstance(raw, dict):
        return {}
    return {
        k: [a for a in v if isinstance(a, str)] for k, v in raw.items() if isinstance(k, str) and isinstance(v, list)
    }


def load_claimers(state_dir: Path) -> dict[str, list[str]]:
    """What this machine's dispatcher has learned so far (empty before its first scan)."""
    raw = read_json(Path(state_dir) / STATE_FILE)
    return parse_claimers(raw.get("claimers") if isinstance(raw, dict) else None)


def placed(model: str, claimed: Sequence[ModelSpec], claimers: Mapping[str, Sequence[str]], alias: str) -> list[str]:
    """`key@machine` addresses of the machines known to claim `model` (`provider/name` or a bare name), this one
    first."""
    out: list[str] = []
    try:
        spec = resolve(list(claimed), model)
        out.append(f"{spec.key}@{alias}")
    except ModelError:
        pass
    for key in sorted(claimers):
        if key == model or (key.split("/")[-1] == model.split("/")[-1] and "/" not in model):
            out += [f"{key}@{m}" for m in sorted(claimers[key]) if m != alias]
    return list(dict.fromkeys(out))


def known_claimer(
    address: str, claimed: Sequence[ModelSpec], claimers: Mapping[str, Sequence[str]], alias: str
) -> bool:
    """Whether some machine is known to claim `address` (`model[@machine]`): with a machine, that one."""
    actor, machine = split_address(address)
    targets = placed(actor, claimed, claimers, alias)
    if machine is None:
        return bool(targets)
    return any(split_address(t)[1] == machine for t in targets)
