"""How `crosstalk demo` ends what it started: each process's group by PID, then any descendant that left its group
but still carries the demo's state root in its environment, found by PID in /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crosstalk.demo.procs import Procs

pytestmark = pytest.mark.timeout(60)

# A child that starts a grandchild in a session of its own (out of the child's process group), prints its PID and
# sleeps; both are ended by the demo's cleanup, the grandchild only by its environment marker.
ESCAPER = """
import os, subprocess, sys, time
g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print(g.pid, flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_close_ends_the_group_and_a_descendant_that_left_it_by_its_marker(tmp_path: Path):
    marker = f"CROSSTALK_HOME={tmp_path}/state"
    procs = Procs(marker)
    env = {**os.environ, "CROSSTALK_HOME": f"{tmp_path}/state"}
    child = procs.spawn([sys.executable, "-c", ESCAPER], env=env, stdout=subprocess.PIPE, text=True)
    grandchild = None
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        assert alive(grandchild) and grandchild in set(procs.strays())
        strays = procs.close()
        assert child.returncode is not None
        assert strays == [grandchild]
        assert wait_gone(grandchild)
        assert list(procs.strays()) == []
    finally:
        for pid in (child.pid, grandchild):
            if pid is not None and alive(pid):
                os.kill(pid, 9)


def test_stop_sends_sigterm_to_the_group_and_reaps_it(tmp_path: Path):
    procs = Procs(f"CROSSTALK_HOME={tmp_path}/x")
    proc = procs.spawn([sys.executable, "-c", "import time; time.sleep(60)"])
    procs.stop(proc, timeout=5)
    assert proc.returncode == -15
    assert procs.close() == []
