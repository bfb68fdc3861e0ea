"""The `@relay:` sender tag is reserved for this machine's relay process: any other local process of the user
claiming it on an agent's socket, in a crosstalk frame or a native envelope, is refused and nothing is delivered."""

from __future__ import annotations

from crosstalk.core.ids import new_message_id
from crosstalk.journal import records as R
from tests.support.uds import answer_of, auth_line, crosstalk_line, native_line, run_peer


def test_a_crosstalk_frame_claiming_a_relay_sender_is_refused(host):
    mid = new_message_id()
    out = run_peer(host.sock, data=auth_line(host.token) + crosstalk_line("hi", message_id=mid, from_="@relay:gpu/bob"))
    ans = answer_of(out["answer"])
    assert (ans["state"], ans["reason"]) == ("rejected", "sender:relay_tag_reserved")
    assert host.fake.attempts == 0
    assert [r["reason"] for r in host.records() if r["type"] == R.REJECTED] == ["sender:relay_tag_reserved"]
    # any other external tag from the same process still passes
    out = run_peer(host.sock, data=auth_line(host.token) + crosstalk_line("hi", message_id=new_message_id()))
    assert answer_of(out["answer"])["state"] == "accepted"


def test_a_native_envelope_claiming_a_relay_sender_is_refused(host):
    content = '<cross-session-message from="uds:/x" from-name="@relay:gpu/bob">hi</cross-session-message>'
    out = run_peer(host.sock, data=auth_line(host.token) + native_line(content))
    assert out["answer"] == b""
    assert host.fake.attempts == 0
    assert [r["reason"] for r in host.records() if r["type"] == R.REJECTED] == ["sender:relay_tag_reserved"]


AS_RELAY_PROCESS = """
import base64, json, os, socket, sys
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import proc_start_time
root, sock, data = sys.argv[1], sys.argv[2], base64.b64decode(sys.argv[3])
lock = FileLock(os.path.join(root, "relay", "serve.lock"))
assert lock.try_acquire()
status = {"pid": os.getpid(), "pid_started": proc_start_time(os.getpid()), "state": "connected"}
with open(os.path.join(root, "relay", "status.json"), "w") as f:
    json.dump(status, f)
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sock)
s.sendall(data)
got = b""
while not got.endswith(b"\\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
sys.stdout.write(got.decode())
"""


def as_relay_process(host, data: bytes) -> dict:
    """One connection from a separate process that is the state root's relay process: it holds relay/serve.lock
    and names itself, with its start time, in relay/status.json (what ingress/relay_peer.py checks)."""
    import base64
    import subprocess
    import sys

    (host.root / "relay").mkdir(exist_ok=True)
    args = [sys.executable, "-c", AS_RELAY_PROCESS, str(host.root), str(host.sock), base64.b64encode(data).decode()]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return answer_of(proc.stdout.encode())


def test_an_ask_from_another_machines_agent_arrives_as_an_ask_only_from_the_relay_process(host):
    ask = {"kind": "ask", "from_": "@relay:gpu/bob"}
    out = run_peer(host.sock, data=auth_line(host.token) + crosstalk_line("q?", message_id=new_message_id(), **ask))
    assert answer_of(out["answer"])["reason"] == "sender:relay_tag_reserved"  # not the relay process: refused
    mid = new_message_id()
    ans = as_relay_process(host, auth_line(host.token) + crosstalk_line("q?", message_id=mid, **ask))
    assert ans["state"] == "accepted", ans
    [rec] = [r for r in host.records() if r["type"] == R.RECEIVED and r["message"]["message_id"] == mid]
    assert (rec["message"]["kind"], rec["transport"], rec["sender"]["class"]) == ("ask", "relay", "external")
    # A relayed command-line sender has no way back for an answer: its ask stays refused, as on the socket.
    cli = {"kind": "ask", "from_": "@relay:gpu/cli:bob"}
    ans = as_relay_process(host, auth_line(host.token) + crosstalk_line("q?", message_id=new_message_id(), **cli))
    assert ans["reason"] == "kind:not_on_uds"
