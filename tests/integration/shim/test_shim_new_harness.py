"""Adding a harness is one package and one registry line: a package written here (outside crosstalk), registered
with one KINDS entry, is served by `crosstalk mcp --harness echo` end to end: its calls are identified by its kind,
its agent gets its adapter, list_agents shows it reachable from what its bind published, and a message sent to it by
name from a fake session lands in its "session"."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from crosstalk import harness as kinds
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.router import CallContext
from crosstalk.shim.tools import ShimRouter
from tests.support.shim_tools import call, ctx, router, run

ECHO = '''
"""A harness whose sessions are files: every injected message is one line of <ECHO_DIR>/<agent name>.txt."""
from pathlib import Path

from crosstalk.core.states import State
from crosstalk.harness.base import BindResult, InjectResult, SessionIdentity, render_envelope


class EchoAdapter:
    name = "echo"

    def __init__(self, directory):
        self.directory, self.path = Path(directory), None

    async def bind(self, agent):
        self.path = self.directory / f"{agent.name}.txt"
        return BindResult(endpoint=str(self.path), version="echo-1")

    async def inject(self, request):
        with open(self.path, "a") as f:
            f.write(request.message.text + "\\n")
        return InjectResult(State.ACCEPTED, evidence={"echo": "written"})

    def status(self):
        return "idle"

    def render(self, request):
        return render_envelope(request)

    def native_reply_address(self, agent):
        return None

    async def close(self):
        return None


class EchoKind:
    name = "echo"
    follows_renames = False

    def identify(self, call):
        ref = call.meta.get("echo/session")
        return SessionIdentity("echo", ref, call.meta.get("echo/name")) if isinstance(ref, str) and ref else None

    def discover(self, environ, known_endpoints=()):
        return []

    def superseded(self, old, new, environ):
        return False

    def adapter(self, session, environ):
        return EchoAdapter(environ["ECHO_DIR"])


KIND = EchoKind()
'''


@pytest.fixture
def echo_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "pkgs" / "crosstalk_echo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(ECHO))
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.setitem(kinds.KINDS, "echo", kinds.Entry("crosstalk_echo"))  # the one line
    yield
    sys.modules.pop("crosstalk_echo", None)


def test_a_harness_package_plus_one_registry_line_is_served_end_to_end(echo_registered: None):
    async def main(root: Path) -> None:
        (root / "echo").mkdir()
        echo = ShimRouter("echo", StatePaths(root / "st"), environ={"ECHO_DIR": str(root / "echo")}, cwd=str(root))
        alice = router(root)
        who = CallContext(meta={"echo/session": "e-1", "echo/name": "ekko"})
        try:
            out, err = await call(echo, "list_agents", who)
            assert not err and "registered as 'ekko'" in out["note"]
            [row] = [r for r in out["agents"] if r.get("self")]
            assert (row["name"], row["harness"], row["crosstalk"], row["reachable"]) == ("ekko", "echo", True, True)
            none, _ = await call(echo, "send_message", CallContext(meta={"crosstalk/session": "s"}), to="x", text="y")
            assert none["state"] == "unbound"  # the echo kind does not take another kind's evidence
            sent, err = await call(alice, "send_message", ctx("s-alice", "alice"), to="ekko", text="hello, echo")
            assert not err and sent["state"] == "accepted", sent
            assert (root / "echo" / "ekko.txt").read_text() == "hello, echo\n"
        finally:
            await alice.close()
            await echo.close()

    run(main)
