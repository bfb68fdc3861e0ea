"""One model run over one batch: its environment, its prompt (PROTOCOL.md, the persona, the thread, the messages)
and the headless run itself. The dispatcher decides what a result means (a reply, silence, a failure)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from crosstalk.bus.errors import Interrupted, ModelError, UnsafeFile
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.message import too_large
from crosstalk.bus.protocol.models import ModelSpec, spawn_env
from crosstalk.bus.protocol.safefs import TEXT_LIMIT, read_transport_text
from crosstalk.bus.runs.prompt import PromptItem, build_prompt, load_persona
from crosstalk.bus.runs.runner import RunResult, run_headless
from crosstalk.bus.runs.scan import Batch
from crosstalk.bus.runs.thread import earlier_in_thread

Log = Callable[..., None]  # EventLog-like: log(event, level?, **fields)


def invoke_batch(
    batch: Batch,
    *,
    root: Path,
    alias: str,
    environ: Mapping[str, str],
    model_timeout: float | None,
    cancel: threading.Event,
    log: Log,
    error: Log,
) -> tuple[str, str | None]:
    """(stdout, error or None) of one model run over the batch; setup problems are failures too. Raises Interrupted
    when `cancel` ended the run."""
    try:
        persona = load_persona(root, batch.as_) if batch.as_ else None
    except ModelError as exc:
        return "", exc.message
    items = [PromptItem(m.msg.sender, m.rel, m.msg.body) for m in batch.messages]
    earlier = earlier_in_thread(root, batch.channel, batch.messages)
    prompt = build_prompt(protocol_text(root, error), persona, items, earlier)
    return run_model(
        batch.model, prompt, root=root, alias=alias, channel=batch.channel, environ=environ, timeout=model_timeout,
        cancel=cancel, log=log, error=error, rels=[m.rel for m in batch.messages], as_=batch.as_,
    )  # fmt: skip


def run_model(
    spec: ModelSpec,
    prompt: str,
    *,
    root: Path,
    alias: str,
    channel: str,
    environ: Mapping[str, str],
    timeout: float | None,
    cancel: threading.Event,
    log: Log,
    error: Log,
    rels: Sequence[str] = (),
    as_: str | None = None,
) -> tuple[str, str | None]:
    """(stdout, error or None) of one headless run of `spec` on `prompt`, with the dispatch metadata in its
    environment (`rels`: the messages it answers). Raises Interrupted when `cancel` ended the run."""
    dispatch_env = {
        "CROSSTALK_TRANSPORT": str(root),
        "CROSSTALK_CHANNEL": channel,
        "CROSSTALK_RE": ",".join(rels),
        "CROSSTALK_FROM": f"{spec.key}@{alias}",
        "CROSSTALK_ALIAS": alias,
    }
    if as_:
        dispatch_env["CROSSTALK_AS"] = as_
    try:
        env = spawn_env(spec, environ, root, dispatch_env)
    except ModelError as exc:
        return "", exc.message
    limit = spec.timeout if timeout is None else timeout
    run: RunResult = run_headless(spec.argv, prompt, env=env, cwd=root, timeout=limit, cancel=cancel)
    duration = f"{run.duration_s:.3f}"
    fields: dict[str, object] = {"channel": channel, "model": spec.key, "n": max(1, len(rels)), "duration": duration}
    if run.interrupted:
        log("dispatch_interrupted", "warn", **fields)
        raise Interrupted("the dispatcher is stopping: the run was ended")
    log("dispatch", **fields, exit=run.exit_code)
    if run.ok and run.stdout_dropped:  # an answer no reply can hold is a failure, never a reply nobody reads
        return run.stdout, too_large(run.stdout_dropped)
    if run.ok:
        return run.stdout, None
    return run.stdout, run.error or "the model failed"


def protocol_text(root: Path, error: Log) -> str:
    """PROTOCOL.md as the prompt's head; "" when it is missing, and "" with a logged error naming it when it is a
    symlink, not a regular file or over the cap (its content never reaches a model then)."""
    try:
        return read_transport_text(root, layout.PROTOCOL_FILE, TEXT_LIMIT, errors="replace")
    except FileNotFoundError:
        return ""
    except (OSError, UnsafeFile) as exc:
        error("unsafe_file", path=layout.PROTOCOL_FILE, error=getattr(exc, "message", None) or str(exc))
        return ""
