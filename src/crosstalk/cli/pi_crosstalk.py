"""`pi-crosstalk`: the command scripts written for the pi-crosstalk extension's CLI call, on crosstalk's own CLI.

    pi-crosstalk list [--json] | who HANDLE | send PEER [TEXT] [--mode auto|steer|followUp]
                 [--kind user|meta|ping] [--from @scheme:topic] | tail PEER

Every verb is `crosstalk VERB` with the same arguments. Exit codes as those scripts expect them: 0 ok, 1 wire or
protocol error (crosstalk's 4, no such agent or unreachable, is one here), 2 usage, 3 ACL denial (a rejection).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from crosstalk.core.errors import ErrorKind, exit_code

VERBS = ("list", "who", "send", "tail")
USAGE = "usage: pi-crosstalk {list,who,send,tail} ..."


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(f"{USAGE}\n{__doc__}")
        raise SystemExit(0 if args else exit_code(ErrorKind.USAGE))
    if args[0] not in VERBS:
        print(f"pi-crosstalk: unknown command {args[0]!r}\n{USAGE}", file=sys.stderr)
        raise SystemExit(exit_code(ErrorKind.USAGE))
    from crosstalk.cli.main import main as crosstalk

    try:
        crosstalk(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        raise SystemExit(exit_code(ErrorKind.FAILED) if code == exit_code(ErrorKind.NO_AGENT) else code) from None
    raise SystemExit(0)
