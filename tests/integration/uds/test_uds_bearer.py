"""Each agent's A2A bearer token: a 0600 file its descriptor points to, mapped back to exactly that agent."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from crosstalk.registry.bearer import BearerDirectory
from crosstalk.registry.credentials import read_key
from crosstalk.registry.descriptor import read_descriptor
from tests.support.uds import HostThread


def test_token_file_names_its_agent_and_nobody_else(host: HostThread) -> None:
    path = host.paths.token_path(host.agent_id)
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    desc = read_descriptor(host.paths.descriptor(host.agent_id))
    assert desc is not None and desc.credential_ref == str(path)
    token = read_key(path)
    assert token not in path.read_text().replace(token, "") and token not in str(desc.to_dict())

    bearer = BearerDirectory(host.paths)
    found = bearer.lookup(token)
    assert found is not None and found.agent_id == host.agent_id
    assert bearer.lookup(token[:-1] + ("0" if token[-1] != "0" else "1")) is None
    assert bearer.lookup("") is None


def test_a_token_file_that_is_not_the_agents_own_names_nobody(host: HostThread, tmp_path: Path) -> None:
    bearer = BearerDirectory(host.paths)
    token = read_key(host.paths.token_path(host.agent_id))
    os.chmod(host.paths.token_path(host.agent_id), 0o644)  # a widened file is refused, not trusted
    assert bearer.lookup(token) is None


def test_token_is_removed_when_the_agent_stops(start_host) -> None:
    host = start_host()
    path = host.paths.token_path(host.agent_id)
    token = read_key(path)
    host.close()
    assert not path.exists()
    assert BearerDirectory(host.paths).lookup(token) is None
