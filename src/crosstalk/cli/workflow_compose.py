"""`crosstalk workflow compose PROSE`: compile prose into a plan on this machine, show it, and let the person say
[y]es (submit it: the marker and its PLAN.json in one commit, so the owner does not compile again), [e]dit (the plan
as YAML in $VISUAL / $EDITOR, validated again when the editor closes) or [n]o (nothing is written)."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from typing import Any

from crosstalk.cli.bus_common import bus_errors, open_transport
from crosstalk.cli.common import Fail, echo
from crosstalk.core.errors import ErrorKind

EDIT_TIMEOUT_S = 3600.0


def run_compose(args: argparse.Namespace) -> int:
    import threading

    from crosstalk.bus.errors import ModelError, PlanError
    from crosstalk.bus.protocol.models import claim, load_registry, resolve
    from crosstalk.bus.runs.invoke import run_model
    from crosstalk.bus.workflow.plan import compile_prompt, parse_plan_output
    from crosstalk.cli.workflow_cmd import submit

    prose = (sys.stdin.read() if args.prose == "-" else args.prose).strip()
    if not prose:
        raise Fail("the workflow's prose is empty", ErrorKind.USAGE)
    transport = open_transport(args)
    with bus_errors():
        claimed, _ = claim(load_registry(transport.root), os.environ.get("PATH"))
        if not claimed:
            raise Fail(f"this machine claims no model of {transport.name}'s data/crosstalk.yaml to compile with")
        try:
            spec = resolve(claimed, args.model) if args.model else claimed[0]
        except ModelError as exc:
            raise Fail(exc.message, ErrorKind.USAGE) from None
        sys.stderr.write(f"compiling with {spec.key} …\n")
        out, failure = run_model(
            spec, compile_prompt(prose, sorted(s.key for s in claimed)), root=transport.root, alias=transport.alias,
            channel="", environ=os.environ, timeout=None, cancel=threading.Event(), log=_quiet, error=_quiet,
        )  # fmt: skip
    if failure is not None:
        raise Fail(f"the compile run failed: {failure}")
    try:
        plan = parse_plan_output(out)
    except PlanError as exc:
        raise Fail(f"{spec.key} did not answer with a valid plan: {exc.message}") from None
    while True:
        echo(_yaml(plan).rstrip())
        answer = "y" if args.yes else _ask("[y]es / [e]dit / [n]o? ")
        if answer in ("y", "yes"):
            rel, _child, _pushed = submit(transport, prose, args.channel, args.from_, plan)
            echo(rel)
            return 0
        if answer in ("n", "no", ""):
            echo("nothing submitted")
            return 1
        if answer in ("e", "edit"):
            try:
                plan = _edit(plan)
            except PlanError as exc:
                echo(f"not a valid plan: {exc.message}; the plan is unchanged")
            continue
        echo("answer y, e or n")


def _quiet(*_args: Any, **_fields: Any) -> None:
    return None


def _ask(prompt: str) -> str:
    try:
        return input(prompt).strip().lower()
    except EOFError:
        return ""


def _yaml(plan: Any) -> str:
    import yaml

    return yaml.safe_dump(plan.to_dict(), sort_keys=False, allow_unicode=True, width=100)


def _edit(plan: Any) -> Any:
    """The plan as the person left it in their editor; PlanError when it is not a valid plan any more."""
    from crosstalk.bus.errors import PlanError
    from crosstalk.bus.protocol.safefs import load_yaml
    from crosstalk.bus.workflow.plan import Plan

    editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
    fd, path = tempfile.mkstemp(prefix="crosstalk-plan-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_yaml(plan))
        try:
            subprocess.run([*editor, path], check=False, timeout=EDIT_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PlanError(f"the editor {editor[0]!r} did not run: {exc}") from None
        with open(path, encoding="utf-8") as f:
            text = f.read(256 * 1024)
        try:
            data = load_yaml(text, "the plan")
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise PlanError(f"not valid YAML ({first})") from None
        return Plan.from_dict(data)
    finally:
        os.unlink(path)
