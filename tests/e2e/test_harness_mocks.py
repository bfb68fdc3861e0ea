"""The real harness CLIs, one-shot, against the local mock model servers: the prompt reaches the model and the
model's answer (and only it) comes back on stdout.

Prompt delivery (claude 2.1.332, codex 0.171.0, pi 0.73.1), as the bus needs it:
  * argv: the prompt is the final positional argument after `argv_prefix`; stdin must then be closed (/dev/null),
    because every one of them also reads a piped stdin and merges it: codex appends it as a `<stdin>` block,
    claude appends it after a newline, pi prepends it with no separator.
  * stdin: with no positional prompt each reads the whole prompt from stdin (`claude -p`, `codex exec`, and
    `pi -p` alike). `codex exec -` also means stdin; pi rejects `-` ("Unknown option"), claude takes it literally.
    Prompts far beyond the 64 KiB the bus sends on argv arrive intact this way.
  * a prompt starting with "-" is parsed as an option unless it follows `--` (claude, codex: their prefixes end in
    `--`); pi has no `--` and also expands a leading "@" as a file, so such prompts go to pi on stdin.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest

from crosstalk.demo.models import REPLY_PREFIX, digest_reply
from tests.support.harness_run import HarnessRun

pytestmark = pytest.mark.timeout(180)
HARNESSES = ("claude", "codex", "pi")

MakeRun = Callable[..., HarnessRun]


def _check(run: HarnessRun, prompt: str, stdout: str, token: str) -> None:
    assert run.mock.model_requests(), f"{run.name} never asked the model"
    assert run.mock.saw(token), f"the {run.name} model requests do not carry {token}"
    assert digest_reply(prompt) in run.mock.replies, f"{run.name}: the model saw a different prompt"
    assert stdout.strip() == digest_reply(prompt), f"{run.name} stdout is not just the answer: {stdout!r}"


@pytest.mark.parametrize("name", HARNESSES)
def test_prompt_as_final_argument_reaches_the_model(harness_run: MakeRun, name: str) -> None:
    run = harness_run(name)
    token = secrets.token_hex(8)
    prompt = f"hello e2e {token}"
    proc = run.run(prompt)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}; stderr:\n{proc.stderr[-3000:]}"
    _check(run, prompt, proc.stdout, token)


@pytest.mark.parametrize("name", HARNESSES)
def test_long_prompt_on_stdin_reaches_the_model(harness_run: MakeRun, name: str) -> None:
    """Over 64 KiB on stdin with no positional prompt: the whole text, last line included, reaches the model."""
    run = harness_run(name)
    token = secrets.token_hex(8)
    filler = "".join(f"line {i:05d} of the long e2e prompt {'.' * 60}\n" for i in range(900))
    prompt = f"hello e2e {token}\n{filler}END-{token}"
    assert len(prompt.encode()) > 64 * 1024
    proc = run.run(stdin=prompt)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}; stderr:\n{proc.stderr[-3000:]}"
    _check(run, prompt, proc.stdout, token)
    assert run.mock.saw(f"END-{token}"), f"{name} cut the stdin prompt short"


@pytest.mark.parametrize("name", HARNESSES)
def test_fixed_reply_is_printed(harness_run: MakeRun, name: str) -> None:
    reply = f"fixed answer {secrets.token_hex(4)}"
    run = harness_run(name, reply=reply)
    proc = run.run("say the fixed thing")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == reply
    assert run.mock.replies and run.mock.replies == [reply] * len(run.mock.replies)
    assert not any(r.startswith(REPLY_PREFIX) for r in run.mock.replies)


@pytest.mark.parametrize("name", HARNESSES)
def test_prompt_that_looks_like_an_option_reaches_the_model(harness_run: MakeRun, name: str) -> None:
    run = harness_run(name)
    token = secrets.token_hex(8)
    for prompt in (f"-v hello e2e {token}", f"@notes hello e2e {token}"):
        proc = run.run(prompt) if run.prompt_fits_argv(prompt) else run.run(stdin=prompt)
        assert proc.returncode == 0, f"{name} exited {proc.returncode}; stderr:\n{proc.stderr[-3000:]}"
        assert proc.stdout.strip() == digest_reply(prompt), f"{name} did not answer {prompt!r}: {proc.stdout!r}"
        assert run.mock.newest_user_text(run.mock.model_requests()[-1].body) == prompt
    assert run.prompt_fits_argv("-x") == (name != "pi")
