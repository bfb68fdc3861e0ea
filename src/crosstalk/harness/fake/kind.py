"""The fake harness kind: sessions that exist only in tests, the demo and benchmarks.

identify: the calling "session" names itself in the call's `_meta` (`crosstalk/session`, optional `crosstalk/name`).
adapter: the scriptable FakeHarness; in a shim, its inbox is `$CROSSTALK_FAKE_INBOX_DIR/<agent name>.jsonl` and
`$CROSSTALK_FAKE_ANSWER` makes it answer every ask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crosstalk.harness.base import CallEvidence, SessionIdentity, SessionRow
from crosstalk.harness.fake.adapter import FakeHarness

NAME = "fake"
SESSION_KEY = "crosstalk/session"
NAME_KEY = "crosstalk/name"


class FakeKind:
    name = NAME
    follows_renames = False

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        ref = call.meta.get(SESSION_KEY)
        if not isinstance(ref, str) or not ref:
            return None
        name = call.meta.get(NAME_KEY)
        return SessionIdentity(NAME, ref, name if isinstance(name, str) and name else None)

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        return []  # a fake session exists only as its agent

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        return False

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> FakeHarness:
        inbox_dir = environ.get("CROSSTALK_FAKE_INBOX_DIR") or None
        # With an inbox file every write is on disk: memory keeps only the newest, so a long-running fake session's
        # shim stays flat (bench/shim_memory.py), as a real harness's does.
        keep = KEEP_WRITES_WITH_INBOX if inbox_dir else None
        return FakeHarness(inbox_dir=inbox_dir, answer=environ.get("CROSSTALK_FAKE_ANSWER"), keep_writes=keep)


KEEP_WRITES_WITH_INBOX = 100

KIND = FakeKind()
