"""Which machines are known to claim a model: this one (the registry's models whose program is on its PATH) and
those whose replies this machine's dispatcher has seen (`from: key@machine`, learned from the history and kept
machine-local in its workflows.json; nothing in the repository says who claims what).

The workflow engine places fanout copies and syntheses with `placed`; `message send` asks `known_claimer` before
it commits a message that no machine would ever answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from crosstalk.bus.errors import ModelError
from crosstalk.bus.protocol.addressing import split_address
from crosstalk.bus.protocol.models import ModelSpec, resolve
from crosstalk.bus.transport.state import read_json

STATE_FILE = "workflows.json"  # in the transport's machine-local state dir: {"open": [...], "claimers": {...}}
HOW_MACHINES_CLAIM = (
    "a machine claims the models of data/crosstalk.yaml whose program is on its PATH; add one with 'crosstalk model "
    "add PROVIDER/NAME -- COMMAND...', and 'crosstalk model list' shows what this machine claims"
)


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
