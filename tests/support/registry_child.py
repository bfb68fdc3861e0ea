"""A child process for the registry integration tests: one JSON command per stdin line, one answer each.

Run as: python tests/support/registry_child.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from crosstalk.doctor.prune import prune_agent
from crosstalk.fs.locks import FileLock
from crosstalk.registry.errors import RegistryError
from crosstalk.registry.paths import StatePaths
from crosstalk.registry.registration import Registration


def prune_stale(paths: StatePaths) -> int:
    """`crosstalk doctor --fix`'s removal, run over every descriptor: each agent whose registration is gone loses
    its files, re-checked under its agent lock. Returns how many descriptors went."""
    removed: list[str] = []
    for path in sorted(paths.agents.glob("*.json")):
        prune_agent(paths, path.stem, removed, [])
    return sum(1 for p in removed if p.endswith(".json"))


def main() -> None:
    locks: list[FileLock] = []
    regs: list[Registration] = []
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd: dict[str, Any] = json.loads(line)
        if "at" in cmd:  # a shared start time makes two children race for real
            time.sleep(max(0.0, cmd["at"] - time.time()))
        op = cmd["op"]
        out: dict[str, Any]
        if op == "lock":
            lock = FileLock(cmd["path"])
            out = {"held": lock.try_acquire()}
            locks.append(lock)
        elif op == "acquire":
            try:
                reg = Registration.acquire(
                    StatePaths(Path(cmd["root"])),
                    harness=cmd["harness"],
                    session_ref=cmd["session_ref"],
                    preferred_name=cmd.get("preferred"),
                    cwd=cmd["cwd"],
                )
            except RegistryError as e:
                out = {"error": type(e).__name__, "message": str(e)}
            else:
                regs.append(reg)
                desc = reg.publish()
                out = {"name": reg.name, "agent_id": reg.agent_id, "notice": reg.name_notice}
                out["instance_id"] = desc.instance_id
        elif op == "close":
            for reg in regs:
                reg.close()
            out = {"closed": len(regs)}
        elif op == "sweep":
            out = {"swept": prune_stale(StatePaths(Path(cmd["root"])))}
        else:
            out = {"error": "unknown op", "message": op}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
