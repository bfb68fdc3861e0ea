"""`crosstalk pi-agent --session ID --cwd DIR`: the core the crosstalk pi extension starts for one pi session
(docs/dev/pi-link.md). The runtime is the extension-harness host (exthost/); this command wires pi into it: the pi
link over stdin and stdout, the pi adapter that delivers over it, and pi's environment names (PI_CROSSTALK_HANDLE,
PI_CROSSTALK_ROLE, PI_CROSSTALK_PARENT).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any


def run_pi_agent(args: Any) -> int:
    return asyncio.run(_serve(args.session, args.cwd, dict(os.environ)))


async def _serve(session: str, cwd: str, environ: dict[str, str]) -> int:
    from crosstalk.exthost import ExtensionCore, ExtensionHarness
    from crosstalk.harness.pi.adapter import PiAdapter
    from crosstalk.harness.pi.link import MAX_LINE, PiLink
    from crosstalk.registry.paths import StatePaths
    from crosstalk.shim.tools import ShimRouter

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    link = PiLink(reader, write)
    router = ShimRouter("pi", StatePaths.from_env(environ), adapters=lambda _ident: PiAdapter(link), environ=environ,
                        cwd=cwd)  # fmt: skip
    pi = ExtensionHarness(name="pi", env_prefix="PI_CROSSTALK", program="crosstalk pi-agent")
    return await ExtensionCore(pi, session, environ, link, router).run()
