"""run_model with real subprocesses: the argv contract, the stdin fallback, timeouts that kill the whole process
group, error text, env precedence, PATH self-selection, absolute-path models and bare-name resolution."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from crosstalk.bus.errors import AmbiguousModel
from crosstalk.bus.protocol.message import MAX_BODY_BYTES
from crosstalk.bus.protocol.models import ModelSpec, claim, load_registry, resolve, spawn_env
from crosstalk.bus.runs.runner import STDIN_THRESHOLD, STDOUT_CAP
from tests.support.bus_dispatch import pid_alive, run_spec, wait_for

PY = sys.executable


def script(where: Path, name: str, body: str, *, shebang: str = PY) -> Path:
    path = where / name
    path.write_text(f"#!{shebang}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


def model(path: Path | str, *args: str, timeout: float = 30.0) -> ModelSpec:
    return ModelSpec("test", Path(path).name, (str(path), *args), None, {}, timeout)


ECHO_ARGV = """
import json, sys
data = sys.stdin.read() if len(sys.argv) == 2 else None
print(json.dumps({"argv": sys.argv[1:], "stdin_sha": data and __import__("hashlib").sha256(data.encode()).hexdigest(),
                  "stdin_len": None if data is None else len(data)}))
"""


def run_json(spec: ModelSpec, prompt: str, cwd: Path) -> dict[str, object]:
    result = run_spec(spec, prompt, env=dict(os.environ), cwd=cwd, timeout=30)
    assert result.ok, result.error
    return json.loads(result.stdout)


def kill_pid(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def test_prompt_is_the_final_positional_and_quotes_stay_literal(tmp: Path) -> None:
    spec = ModelSpec("test", "echo", (str(script(tmp, "echo", ECHO_ARGV)), "--flag", "'quoted'"), None, {}, 30)
    prompt = "hello $(whoami) | cat > /dev/null 'x' \"y\"\nsecond line"
    out = run_json(spec, prompt, tmp)
    assert out["argv"] == ["--flag", "'quoted'", prompt]
    assert out["stdin_sha"] is None


def test_stdin_fallback_above_64k(tmp: Path) -> None:
    spec = model(script(tmp, "echo", ECHO_ARGV), "--x")
    at_limit = "a" * STDIN_THRESHOLD
    out = run_json(spec, at_limit, tmp)
    assert out["argv"] == ["--x", at_limit]  # exactly 64 KiB still goes as the positional
    big = "é" * (STDIN_THRESHOLD // 2 + 1)  # over 64 KiB in UTF-8 bytes though fewer characters
    out = run_json(spec, big, tmp)
    assert out["argv"] == ["--x"]
    assert out["stdin_sha"] == hashlib.sha256(big.encode()).hexdigest()


def test_large_prompt_to_a_model_that_ignores_stdin(tmp: Path) -> None:
    spec = model(script(tmp, "quick", "print('done')\n"))
    result = run_spec(spec, "x" * (4 * STDIN_THRESHOLD), env=dict(os.environ), cwd=tmp, timeout=30)
    assert result.ok and result.stdout == "done\n"


def test_cwd_and_stdin_is_devnull_for_positional_prompts(tmp: Path) -> None:
    body = "import os, sys\nprint(os.getcwd())\nprint(repr(sys.stdin.read()))\n"
    result = run_spec(model(script(tmp, "cwd", body)), "p", env=dict(os.environ), cwd=tmp, timeout=30)
    assert result.ok
    assert result.stdout.splitlines() == [str(tmp.resolve()), "''"]


def test_nonzero_exit_error_text(tmp: Path) -> None:
    body = "import sys\nprint('partial answer')\nsys.stderr.write('warming up\\nboom: bad token\\n')\nsys.exit(3)\n"
    result = run_spec(model(script(tmp, "fail", body)), "p", env=dict(os.environ), cwd=tmp, timeout=30)
    assert not result.ok and not result.timed_out
    assert result.exit_code == 3
    assert result.error == "exit 3: warming up | boom: bad token (stdout: partial answer)"
    assert result.stdout == "partial answer\n"
    stdout_only = "import sys\nprint('401 unauthorized')\nsys.exit(1)\n"
    result = run_spec(model(script(tmp, "fail2", stdout_only)), "p", env=dict(os.environ), cwd=tmp, timeout=30)
    assert result.error == "exit 1: 401 unauthorized"
    silent = run_spec(model(script(tmp, "fail3", "raise SystemExit(2)\n")), "p", env={}, cwd=tmp, timeout=30)
    assert silent.error == "exit 2 (no output)"


def test_spawn_failure(tmp: Path) -> None:
    result = run_spec(model(tmp / "missing"), "p", env=dict(os.environ), cwd=tmp, timeout=30)
    assert not result.ok and result.exit_code is None
    assert result.error is not None and result.error.startswith(f"cannot run {tmp / 'missing'}:")


# The model starts a grandchild (which ignores SIGTERM, so only the SIGKILL step ends it), records its pid, then
# outlives the timeout; the grandchild keeps our stdout pipe open too.
SLEEPER = """
import os, subprocess, sys, time
child = subprocess.Popen(["bash", "-c", "trap '' TERM; while :; do sleep 1; done"])
open(sys.argv[1], "w").write(str(child.pid))
print("started", flush=True)
time.sleep(300)
"""


def test_timeout_kills_the_process_group_including_grandchildren(tmp: Path) -> None:
    pidfile = tmp / "grandchild.pid"
    spec = model(script(tmp, "sleeper", SLEEPER), str(pidfile))
    grandchild = None
    try:
        result = run_spec(spec, "p", env=dict(os.environ), cwd=tmp, timeout=3)
        grandchild = int(pidfile.read_text())
        assert result.timed_out and not result.ok
        assert result.error == "timed out after 3s"
        assert result.stdout == "started\n"
        wait_for(lambda: not pid_alive(grandchild), 10, f"grandchild {grandchild} to end after the timeout")
    finally:
        if grandchild is not None:
            kill_pid(grandchild)


def test_leftover_background_process_does_not_hold_the_run(tmp: Path) -> None:
    body = """
import subprocess, sys
child = subprocess.Popen(["sleep", "300"])  # inherits our stdout/stderr
open(sys.argv[1], "w").write(str(child.pid))
print("answer")
"""
    pidfile = tmp / "bg.pid"
    grandchild = None
    try:
        result = run_spec(model(script(tmp, "bg", body), str(pidfile)), "p", env=dict(os.environ), cwd=tmp, timeout=60)
        grandchild = int(pidfile.read_text())
        assert result.ok and not result.timed_out and result.stdout == "answer\n"
        wait_for(lambda: not pid_alive(grandchild), 10, f"the leftover {grandchild} to end")
    finally:
        if grandchild is not None:
            kill_pid(grandchild)


def test_stdout_over_what_a_reply_may_hold_is_cut_and_the_cut_is_counted(tmp: Path) -> None:
    assert STDOUT_CAP <= MAX_BODY_BYTES  # a captured answer always fits in a reply
    body = f"import sys\nsys.stdout.write('x' * {STDOUT_CAP + 1000})\n"
    result = run_spec(model(script(tmp, "big", body)), "p", env=dict(os.environ), cwd=tmp, timeout=60)
    assert result.ok
    assert result.stdout == "x" * STDOUT_CAP
    assert result.stdout_dropped == 1000


ENV_PRINTER = """
import json, os
print(json.dumps({k: os.environ.get(k) for k in ("A", "B", "C", "D", "CROSSTALK_CHANNEL", "SECRET")}))
"""


def test_env_precedence_process_envfile_env_dispatch(tmp: Path) -> None:
    printer = script(tmp, "envprint", ENV_PRINTER)
    (tmp / "data").mkdir()
    (tmp / "auth").mkdir()
    (tmp / "auth" / "p.env").write_text("# the dotenv layer\nA=file\nB=file\nC=file\nSECRET=s3#cr=t\n")
    (tmp / "data" / "crosstalk.yaml").write_text(
        f"providers:\n  p:\n    env_file: auth/p.env\n    env:\n      B: ${{HOST_B}}\n      C: ${{HOST_C}}\n"
        f"    models:\n      show: {printer}\n"
    )
    registry = load_registry(tmp)
    claimed, skipped = claim(registry, os.environ.get("PATH"))
    assert skipped == [] and [m.key for m in claimed] == ["p/show"]
    base = {**os.environ, "A": "proc", "B": "proc", "C": "proc", "D": "proc", "HOST_B": "inline", "HOST_C": "inline"}
    env = spawn_env(claimed[0], base, tmp, {"C": "dispatch", "CROSSTALK_CHANNEL": "uuid-1"})
    result = run_spec(claimed[0], "p", env=env, cwd=tmp, timeout=30)
    assert result.ok, result.error
    assert json.loads(result.stdout) == {
        "A": "file",
        "B": "inline",
        "C": "dispatch",
        "D": "proc",
        "CROSSTALK_CHANNEL": "uuid-1",
        "SECRET": "s3#cr=t",
    }


def test_path_self_selection_absolute_paths_and_bare_names(tmp: Path) -> None:
    bindir = tmp / "bin"
    bindir.mkdir()
    script(bindir, "xt-echo", "import sys\nprint('via PATH', *sys.argv[1:])\n")
    noexec = script(tmp, "noexec", "print('x')\n")
    noexec.chmod(0o644)
    absolute = script(tmp, "abs-model", "print('absolute')\n")
    (tmp / "data").mkdir()
    (tmp / "data" / "crosstalk.yaml").write_text(
        "providers:\n"
        "  a:\n    models:\n      sonnet: xt-echo --a\n      gone: xt-not-installed --x\n"
        f"  b:\n    models:\n      sonnet: xt-echo --b\n      abs: {absolute}\n"
        f"      missing: {tmp}/nope\n      noexec: {noexec}\n"
    )
    path_env = f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    claimed, skipped = claim(load_registry(tmp), path_env)
    assert [m.key for m in claimed] == ["a/sonnet", "b/sonnet", "b/abs"]
    reasons = {s.what: s.reason for s in skipped}
    assert reasons["a/gone"] == "not claimed: 'xt-not-installed' is not on PATH"
    assert reasons["b/missing"] == f"not claimed: {tmp}/nope does not exist"
    assert reasons["b/noexec"] == f"not claimed: {noexec} is not executable"

    with pytest.raises(AmbiguousModel) as info:
        resolve(claimed, "sonnet")
    assert info.value.choices == ("a/sonnet", "b/sonnet")
    assert "a/sonnet, b/sonnet" in info.value.message

    env = {**os.environ, "PATH": path_env}
    result = run_spec(resolve(claimed, "b/sonnet"), "hi", env=env, cwd=tmp, timeout=30)
    assert result.ok and result.stdout == "via PATH --b hi\n"
    result = run_spec(resolve(claimed, "abs"), "hi", env=env, cwd=tmp, timeout=30)
    assert result.ok and result.stdout == "absolute\n"
    # Not on the PATH the model runs with: a clear spawn error rather than a hang or a traceback.
    result = run_spec(resolve(claimed, "a/sonnet"), "hi", env={"PATH": str(tmp)}, cwd=tmp, timeout=30)
    assert not result.ok and result.error is not None and result.error.startswith("cannot run xt-echo:")


def test_bash_wrapper_reads_prompt_from_dollar_one(tmp: Path) -> None:
    wrapper = script(tmp, "wrap.sh", 'printf "%s|" "$@"\n', shebang="/bin/bash")
    result = run_spec(model(wrapper, "-q"), "the prompt", env=dict(os.environ), cwd=tmp, timeout=30)
    assert result.ok and result.stdout == "-q|the prompt|"
