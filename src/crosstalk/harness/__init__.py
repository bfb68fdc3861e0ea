"""The registry of harness kinds. Adding a harness is one package under harness/ (exposing `KIND`, a
harness.base.HarnessKind) and one line here. `crosstalk mcp --harness`, `crosstalk agent run --harness` and `auto`
detection are derived from this table, in its order.

The table holds module paths, not the kinds: building the CLI's parser reads it without importing any harness.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not `typing`: this module is on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from crosstalk.harness.base import CallEvidence, HarnessKind, SessionIdentity, SessionRow

AUTO = "auto"


class Entry:
    """One registered kind: its package, and what the CLI offers it for. `auto`: tried by `--harness auto`.
    `standalone`: `crosstalk agent run --harness NAME` can host a session of it with no harness process. `native`: it
    writes into sessions that run without crosstalk (harness.base.NativeDelivery), so `native_sessions` asks it, and
    only it: `crosstalk send` to a name no crosstalk agent holds imports no other kind. `installable`: `crosstalk
    install NAME` sets a user's harness up (its kind is a harness.base.Installable)."""

    __slots__ = ("auto", "installable", "module", "native", "standalone")

    def __init__(
        self,
        module: str,
        *,
        auto: bool = False,
        standalone: bool = False,
        native: bool = False,
        installable: bool = True,
    ) -> None:
        self.module, self.auto, self.standalone, self.native = module, auto, standalone, native
        self.installable = installable


# Order matters for `auto`: the first kind that identifies a call wins (a Codex call carries its thread id; a Claude
# call only its parent process).
KINDS: dict[str, Entry] = {
    "codex": Entry("crosstalk.harness.codex", auto=True, native=True),
    "claude": Entry("crosstalk.harness.claude", auto=True, native=True),
    "fake": Entry("crosstalk.harness.fake", standalone=True, installable=False),
    "pi": Entry("crosstalk.harness.pi"),
    "qwen": Entry("crosstalk.harness.qwen", auto=True, native=True),
    "gemini": Entry("crosstalk.harness.gemini", auto=True),
    "opencode": Entry("crosstalk.harness.opencode", native=True),
}


def names() -> tuple[str, ...]:
    return tuple(KINDS)


def installable() -> tuple[str, ...]:
    """What `crosstalk install` and `uninstall` accept."""
    return tuple(n for n, e in KINDS.items() if e.installable)


def standalone() -> tuple[str, ...]:
    """What `crosstalk agent run --harness` accepts."""
    return tuple(n for n, e in KINDS.items() if e.standalone)


def choices() -> tuple[str, ...]:
    """What `crosstalk mcp --harness` accepts: auto, then every kind."""
    return (AUTO, *KINDS)


def kind(name: str) -> HarnessKind:
    """The registered kind `name`; ValueError naming the choices otherwise."""
    entry = KINDS.get(name)
    if entry is None:
        raise ValueError(f"unknown harness {name!r} (expected one of: {', '.join(choices())})")
    return importlib.import_module(entry.module).KIND


def candidates(name: str) -> list[HarnessKind]:
    """The kinds a shim started with `--harness name` tells its callers apart by: one, or for auto every kind
    marked auto, in registry order."""
    if name == AUTO:
        return [kind(n) for n, e in KINDS.items() if e.auto]
    return [kind(name)]


def take_evidence(
    name: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any]
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any]]:
    """(the tool's arguments, the call's meta) with the keys the harness(es) of `--harness name` stamp into every
    tool call to name the calling session (a kind's `evidence_args`: OpenCode's plugin) moved from the first to the
    second: they are evidence of who calls, not arguments of the tool; a stamp wins over `_meta`'s same key."""
    stamps = [key for k in candidates(name) for key in getattr(k, "evidence_args", ())]
    if not stamps or not arguments or not any(key in arguments for key in stamps):
        return arguments, meta
    evidence = {key: arguments[key] for key in stamps if key in arguments}
    return {k: v for k, v in arguments.items() if k not in evidence}, {**meta, **evidence}


def identify(name: str, call: CallEvidence) -> SessionIdentity | None:
    """The calling session under `--harness name`: the first candidate kind with evidence, else None."""
    for k in candidates(name):
        found = k.identify(call)
        if found is not None:
            return found
    return None


def discover(environ: Mapping[str, str], known: Mapping[str, Sequence[str]] | None = None) -> list[SessionRow]:
    """Every session the registered kinds know on this machine, with or without crosstalk. `known`: harness name ->
    the endpoints its crosstalk agents are bound to (registry.discovery.recorded_endpoints). A kind that fails to
    look is skipped (logged): one broken harness never breaks a listing."""
    rows: list[SessionRow] = []
    for name in KINDS:
        try:
            rows.extend(kind(name).discover(environ, tuple((known or {}).get(name, ()))))
        except Exception:
            import logging

            logging.getLogger(__name__).exception("discovering %s sessions failed", name)
    return rows


def native_sessions(
    name: str, environ: Mapping[str, str], known: Mapping[str, Sequence[str]] | None = None
) -> list[tuple[HarnessKind, SessionRow]]:
    """The live sessions named `name` whose kind can write into them without crosstalk (NativeDelivery)."""
    from crosstalk.harness.base import NativeDelivery

    found: list[tuple[HarnessKind, SessionRow]] = []
    for kind_name, entry in KINDS.items():
        if not entry.native:
            continue
        k = kind(kind_name)
        if isinstance(k, NativeDelivery):
            rows = k.discover(environ, tuple((known or {}).get(kind_name, ())))
            found += [(k, row) for row in rows if row.name == name]
    return found
