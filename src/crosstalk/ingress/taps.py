"""Where an agent process's traffic with its harness can be watched: the MCP stdio streams (shim/stdio.py) and each
connection accepted on an agent's socket (ingress/uds.py) pass through these functions.

Nothing watches by default: each function hands its stream back untouched. `crosstalk capture`'s recorder
(capture/tap.py) installs itself here in the processes that serve agents (cli/main.py), so the layers below the
top never import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class Taps(Protocol):
    def reader(self, reader: Any, channel: str) -> Any:
        """Watch the lines fed to an asyncio.StreamReader (direction "in"); returns the reader."""
        ...

    def writer(self, writer: Any, channel: str) -> Any:
        """Watch the lines written to a writer (direction "out"); returns the writer."""
        ...

    def connection(self, reader: Any, writer: Any, socket_path: Path) -> None:
        """Watch one connection accepted on an agent's socket (<root>/sock/<agent_id>.sock), both ways."""
        ...


_installed: Taps | None = None


def install(taps: Taps) -> None:
    """Route every stream this process opens from now on through `taps`."""
    global _installed
    _installed = taps


def tap_reader(reader: Any, channel: str) -> Any:
    return reader if _installed is None else _installed.reader(reader, channel)


def tap_writer(writer: Any, channel: str) -> Any:
    return writer if _installed is None else _installed.writer(writer, channel)


def tap_connection(reader: Any, writer: Any, socket_path: Path) -> None:
    if _installed is not None:
        _installed.connection(reader, writer, socket_path)
