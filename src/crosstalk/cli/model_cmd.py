"""`crosstalk model add|list|remove`: the models of a transport's registry (data/crosstalk.yaml), edited for you.

`model add PROVIDER/NAME -- COMMAND...` writes the model into the registry (keeping its comments), checks it with
the registry's own parser, and commits and pushes it like every bus write; each dispatcher whose PATH has the
command's program then claims it on its next tick.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.common import Fail, echo, print_json
from crosstalk.core.errors import ErrorKind

_COLUMNS = ("MODEL", "CLAIMED HERE", "KNOWN ON", "COMMAND", "WHY NOT HERE")


def _after_dashes(base: type[argparse.ArgumentParser]) -> type[argparse.ArgumentParser]:
    """A parser class that takes everything after the first `--` as the command, verbatim: argparse alone drops a
    second `--` (which ends many model commands, `claude ... --`) or reads the command's flags as its own."""

    class AfterDashes(base):  # type: ignore[misc, valid-type]
        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            args = list(sys.argv[1:] if args is None else args)
            command: list[str] | None = None
            if "--" in args:
                cut = args.index("--")
                args, command = args[:cut], args[cut + 1 :]
            ns, extras = super().parse_known_args(args, namespace)
            ns.command_argv = command
            return ns, extras

    return AfterDashes


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "model",
        help="Add, list and remove the models of a transport's registry (data/crosstalk.yaml).",
        description="The models every machine of the transport may claim: a machine claims a model whose program "
        "is on its PATH. Changes are committed and pushed, like every bus write.",
    )
    verbs = p.add_subparsers(dest="model_command", metavar="COMMAND", parser_class=_after_dashes(type(p)))

    add = verbs.add_parser(
        "add",
        help="Add a model: crosstalk model add PROVIDER/NAME -- COMMAND...",
        description="Add PROVIDER/NAME to data/crosstalk.yaml, run as COMMAND (everything after '--'; the prompt is "
        "appended as its last argument), then commit and push. The command is stored as its arguments joined by "
        "spaces: no shell, no quoting.",
    )
    add.add_argument("key", metavar="PROVIDER/NAME")
    add.add_argument("--replace", action="store_true", help="Change the command of a model already declared.")
    add.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(add)
    add.set_defaults(run="crosstalk.cli.model_cmd:run_add")

    ls = verbs.add_parser("list", help="List the declared models: claimed here, known on which machines, command.")
    ls.add_argument("--json", dest="as_json", action="store_true", help="Print a JSON array.")
    add_transport_option(ls)
    ls.set_defaults(run="crosstalk.cli.model_cmd:run_list")

    rm = verbs.add_parser("remove", help="Remove a model from data/crosstalk.yaml (commit and push).")
    rm.add_argument("key", metavar="PROVIDER/NAME")
    rm.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(rm)
    rm.set_defaults(run="crosstalk.cli.model_cmd:run_remove")


def _no_command(args: argparse.Namespace, verb: str) -> None:
    if args.command_argv is not None:
        raise Fail(f"model {verb} takes no command after '--'", ErrorKind.USAGE)


def _claimed_here(transport: Any, key: str) -> str | None:
    """None when this machine claims `key` now, else why not."""
    from crosstalk.bus.protocol.models import claim, load_registry

    _, skipped = claim(load_registry(transport.root), os.environ.get("PATH"))
    return next((s.reason.removeprefix("not claimed: ") for s in skipped if s.what == key), None)


def _edit(args: argparse.Namespace, edit: Any, summary: str | Callable[[Any], str]) -> tuple[Any, Any, Any]:
    """Check PROVIDER/NAME, then apply `edit` to the transport's registry text under its lock, commit and push it:
    (transport, the change, the publish result). A bad name or registry is one usage error."""
    from crosstalk.bus.errors import ModelError
    from crosstalk.bus.transport.registry_edit import edit_registry, parse_key

    try:
        parse_key(args.key)
    except ModelError as exc:
        raise Fail(exc.message, ErrorKind.USAGE) from None
    transport = open_transport(args)
    with bus_errors():
        try:
            change, result = edit_registry(transport, edit, summary if isinstance(summary, str) else summary(transport))
        except ModelError as exc:
            raise Fail(exc.message, ErrorKind.USAGE) from None
    _warn_push(result)
    return transport, change, result


def run_add(args: argparse.Namespace) -> int:
    from crosstalk.bus.errors import ModelError
    from crosstalk.bus.transport.registry_edit import add_model, command_line

    if args.command_argv is None:
        raise Fail(f"no command given: crosstalk model add {args.key} -- COMMAND...", ErrorKind.USAGE)
    try:
        command_line(args.command_argv)
    except ModelError as exc:
        raise Fail(exc.message, ErrorKind.USAGE) from None
    from crosstalk.bus.protocol.models import unrunnable
    from crosstalk.bus.runs.claimers import add_summary

    runs_here = unrunnable(args.command_argv[0], os.environ.get("PATH")) is None
    transport, change, result = _edit(
        args, lambda text: add_model(text, args.key, args.command_argv, replace=args.replace),
        lambda t: add_summary(args.key, t.alias if runs_here else None),
    )  # fmt: skip
    with bus_errors():
        not_here = _claimed_here(transport, args.key)
    assert change.spec is not None
    if args.as_json:
        print_json(
            {
                "model": change.spec.key,
                "argv": list(change.spec.argv),
                "claimed_here": not_here is None,
                "reason": not_here,
                "commit": result.commit,
                "pushed": result.pushed,
            }
        )
        return 0
    echo(f"added {change.spec.key}: {' '.join(change.spec.argv)}")
    echo(f"claimed here ({transport.alias})" if not_here is None else f"not claimed here: {not_here}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.registry_edit import remove_model

    _no_command(args, "remove")
    _, change, result = _edit(args, lambda text: remove_model(text, args.key), f"crosstalk: model remove {args.key}")
    if args.as_json:
        print_json({"removed": args.key, "note": change.note, "commit": result.commit, "pushed": result.pushed})
        return 0
    echo(f"removed {args.key}" + (f" ({change.note})" if change.note else ""))
    return 0


def run_list(args: argparse.Namespace) -> int:
    from crosstalk.bus.protocol.models import claim, load_registry
    from crosstalk.bus.runs.claimers import known_claimers, placed

    _no_command(args, "list")
    transport = open_transport(args)
    with bus_errors():
        registry = load_registry(transport.root)
    claimed, skipped = claim(registry, os.environ.get("PATH"))
    learned = known_claimers(transport)
    reasons = {s.what: s.reason for s in skipped}
    rows: list[dict[str, Any]] = []
    for spec in registry.models:
        machines = [a.rpartition("@")[2] for a in placed(spec.key, claimed, learned, transport.alias)]
        rows.append(
            {
                "model": spec.key,
                "argv": list(spec.argv),
                "claimed_here": spec.key not in reasons,
                "reason": reasons.get(spec.key),
                "known_on": machines,
            }
        )
    declared = {spec.key for spec in registry.models}
    for s in registry.skipped:
        if s.what not in declared:
            sys.stderr.write(f"crosstalk: warning: {s.reason}\n")
    # A missing env_file matters only where a model of its provider runs: on a machine that claims one.
    running = {spec.provider for spec in claimed}
    for warning in registry.warnings:
        if warning.what in running:
            sys.stderr.write(f"crosstalk: warning: {warning.reason}\n")
    if args.as_json:
        print_json(rows)
        return 0
    if not rows:
        echo("no models declared: add one with 'crosstalk model add PROVIDER/NAME -- COMMAND...'")
        return 0
    table = [
        [
            r["model"],
            "yes" if r["claimed_here"] else "no",
            ", ".join(r["known_on"]) or "-",
            " ".join(r["argv"]),
            (r["reason"] or "").removeprefix("not claimed: "),
        ]
        for r in rows
    ]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(_COLUMNS)]
    echo("  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths, strict=True)).rstrip())
    for t in table:
        echo("  ".join(v.ljust(w) for v, w in zip(t, widths, strict=True)).rstrip())
    return 0


def _warn_push(result: Any) -> None:
    if result.push_error:
        sys.stderr.write(
            f"crosstalk: warning: the change is committed locally but the push failed ({result.push_error}); "
            "the dispatcher pushes it later\n"
        )
