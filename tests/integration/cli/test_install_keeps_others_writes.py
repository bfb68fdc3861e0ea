"""install/uninstall against a harness that writes its config at the same time, and against files they created:
no update of the other writer is lost, and uninstall deletes a config file only when crosstalk created it and it
holds nothing else, reporting `removed` only for a deleted file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crosstalk.harness.claude import install as claude
from tests.support.procs import Procs

CMD = ["/opt/xt/bin/crosstalk", "mcp"]
WRITER_TIMEOUT_S = 120

# Claude Code's save, as its binary does it: the `<file>.lock` directory (proper-lockfile), read, change one key,
# temp file + rename. Each update adds a key of its own; it writes until told to stop, then prints its count. Between
# saves it lets go for a millisecond, as a program that saves far less often does: a writer that takes the lock again
# the instant it frees it would starve any other process polling for it (proper-lockfile has no queue either).
WRITER = r"""
import json, os, sys, time
path, stop = sys.argv[1], sys.argv[2]
lock = path + ".lock"
n = 0
deadline = time.monotonic() + 100
while not os.path.exists(stop) and time.monotonic() < deadline:
    try:
        os.mkdir(lock)
    except FileExistsError:
        time.sleep(0.001)
        continue
    try:
        with open(path) as f:
            data = json.load(f)
        data["w%d" % n] = n
        tmp = path + ".w.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, path)
        n += 1
    finally:
        os.rmdir(lock)
    time.sleep(0.001)
print(n)
"""


def test_no_update_of_claude_code_writing_its_config_meanwhile_is_lost(tmp_path: Path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    path = cfg / ".claude.json"
    path.write_text(json.dumps({"userID": "u"}))
    env = {"CLAUDE_CONFIG_DIR": str(cfg), "HOME": str(tmp_path)}
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(stop)], stdout=subprocess.PIPE)
    try:
        for _ in range(150):
            claude.install("user", CMD, env, tmp_path)
            claude.uninstall("user", env, tmp_path)
        claude.install("user", CMD, env, tmp_path)
        stop.touch()
        out, _ = writer.communicate(timeout=WRITER_TIMEOUT_S)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(10)
        if writer.stdout is not None:
            writer.stdout.close()  # closed on failure too: a pipe left to the collector warns in a later test
    count = int(out)
    assert count > 100  # the two really ran at the same time
    data = json.loads(path.read_text())
    assert [n for n in range(count) if data.get(f"w{n}") != n] == []
    assert data["userID"] == "u" and data["mcpServers"]["crosstalk"] == claude.entry(CMD)


def test_uninstall_deletes_only_a_file_crosstalk_created_that_holds_nothing_else(xt: Procs):
    codex = xt.root / "codex"
    config = codex / "config.toml"
    assert xt.cli("install", "codex").returncode == 0
    assert config.exists()
    res = xt.cli("uninstall", "codex")
    assert res.returncode == 0, res.stderr
    assert f"removed   {config}" in res.stdout
    assert not config.exists() and not codex.exists()  # the directory install made for it goes too
    # a file the user had, even an empty one: put back as it was, reported `restored`
    codex.mkdir()
    config.write_text("")
    assert xt.cli("install", "codex").returncode == 0
    res = xt.cli("uninstall", "codex")
    assert f"restored  {config}" in res.stdout and "removed" not in res.stdout
    assert config.read_bytes() == b"" and codex.is_dir()
    # created by crosstalk, then the user wrote into it: kept
    config.unlink()
    assert xt.cli("install", "codex").returncode == 0
    config.write_text(config.read_text() + "# mine\n")
    res = xt.cli("uninstall", "codex")
    assert f"updated   {config}" in res.stdout
    assert config.read_text() == "# mine\n"


def test_a_skill_the_user_changed_is_named_as_kept(xt: Procs):
    skill = xt.root / "claude" / "skills" / "crosstalk" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("mine\n")
    res = xt.cli("install", "claude")
    assert res.returncode == 0, res.stderr
    assert f"kept      {skill} (yours: changed since crosstalk wrote it" in res.stdout
    assert skill.read_text() == "mine\n"
    assert os.path.exists(xt.root / "claude" / ".claude.json")
