"""The task table stays bounded: every unfinished task is kept, and of the terminal ones only the newest."""

from __future__ import annotations

import time
from typing import Any

from crosstalk.journal import records as R
from crosstalk.tasks.table import TaskTable

BOUND = 30


def task(tid: str, state: str, mid: str) -> dict[str, Any]:
    return {"type": R.TASK, "ts": time.time(), "task_id": tid, "state": state, "message_id": mid, "entry": "user",
            "text": "hi", "creator": "c" * 16}  # fmt: skip


def test_terminal_tasks_past_the_bound_are_let_go_and_open_ones_stay() -> None:
    table = TaskTable(lambda _mid: "", max_terminal=BOUND)
    table.apply(task("open-0", "working", "m-open-0"))
    for i in range(20 * BOUND):
        table.apply(task(f"t{i}", "submitted", f"m{i}"))
        table.apply(task(f"t{i}", "completed", f"m{i}"))
    table.apply(task("open-1", "submitted", "m-open-1"))

    assert len(table.tasks) <= BOUND + max(16, BOUND // 8) + 2  # not 20 × BOUND
    assert {"open-0", "open-1", f"t{20 * BOUND - 1}"} <= set(table.tasks)
    assert table.get("t0") is None and table.holding("m0") is None  # its message index goes with it
    assert len(table.task_of_message) == sum(len(t.messages) for t in table.tasks.values())
