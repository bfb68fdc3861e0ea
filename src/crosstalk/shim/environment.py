"""Whether this shim uses the state root its harness's user does. A harness may filter its MCP children's
environment (Codex passes only HOME, LANG, PATH, SHELL, TERM, TMPDIR and the entry's own `env`), so a CROSSTALK_HOME
set in the user's shell but missing from the entry would put this session in a second state root, where no agent
started from that shell can see it. The harness process's own environment (/proc/<its pid>/environ, as it was
started) is the shell's: the root it names is compared with ours, and a difference is reported, never silent."""

from __future__ import annotations

import os
from collections.abc import Mapping

from crosstalk.registry.paths import StatePaths


def state_root_mismatch(paths: StatePaths, harness_environ: Mapping[str, str] | None) -> str | None:
    """The model-facing warning when the harness's environment names another state root than ours, else None."""
    if harness_environ is None:
        return None
    theirs = StatePaths.from_env(harness_environ).root
    if os.path.realpath(theirs) == os.path.realpath(paths.root):
        return None
    return (
        f"state_root_mismatch: this session's crosstalk state is in {paths.root}, but your harness was started "
        f"with {theirs} (CROSSTALK_HOME); agents using {theirs} cannot see this session nor it them. Tell your "
        "user to run `crosstalk install` again from the shell they start the harness from, then restart it"
    )
