"""The `crosstalk watch` screen (textual): agents, live traffic and bus transports, each a table.

What changes is learnt from inotify (inotify.py) on the state root's directories and each transport's state and
git directories: a file event takes a new snapshot (debounced: events that arrive while one is being taken make
exactly one more). A slow timer (LIVENESS_S) covers what no file event announces: an agent process that died
without unregistering, and the heartbeat's age. Without inotify the same timer, at FALLBACK_S, takes every
snapshot; a snapshot reads only files whose size or mtime changed (snapshot.py).
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Static

from crosstalk.watch.inotify import Inotify
from crosstalk.watch.records import Snapshot
from crosstalk.watch.rows import (
    AGENT_COLUMNS,
    TRAFFIC_COLUMNS,
    TRANSPORT_COLUMNS,
    agent_rows,
    agents_title,
    traffic_row,
    transport_row,
)
from crosstalk.watch.snapshot import Reader

COLUMNS = {"agents": AGENT_COLUMNS, "transports": TRANSPORT_COLUMNS, "traffic": TRAFFIC_COLUMNS}

LIVENESS_S = 2.0  # with inotify: how often liveness and ages are looked at
FALLBACK_S = 1.0  # without inotify: how often a snapshot is taken


class WatchApp(App[int]):
    TITLE = "crosstalk watch"
    CSS = """
    .heading { padding: 0 1; text-style: bold; background: $boost; }
    #agents { height: auto; max-height: 40%; }
    #transports { height: auto; max-height: 25%; }
    #traffic { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_watch", "Quit"),
        Binding("r", "refresh_now", "Refresh"),
        # A monitor is left with Ctrl+C in every terminal; textual would only say how to quit.
        Binding("ctrl+c", "quit_watch", "Quit", show=False, priority=True),
    ]

    def __init__(self, reader: Reader, *, use_inotify: bool = True, tick_s: float | None = None) -> None:
        super().__init__()
        self.reader = reader
        self._tick_s = tick_s
        self.snapshot: Snapshot | None = None
        self._inotify = Inotify.create() if use_inotify else None
        self._busy = False
        self._again = False
        self._shown: dict[str, object] = {}  # what each heading and table shows now

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Agents", id="agents-heading", classes="heading")
        yield DataTable(id="agents", cursor_type="row", zebra_stripes=True)
        yield Static("Transports", id="transports-heading", classes="heading")
        yield DataTable(id="transports", cursor_type="row")
        yield Static("Traffic (newest first)", id="traffic-heading", classes="heading")
        yield DataTable(id="traffic", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = str(self.reader.paths.root)
        for table_id, columns in COLUMNS.items():
            _fill(self.query_one(f"#{table_id}", DataTable), columns, [])
        if self._inotify is not None:
            asyncio.get_running_loop().add_reader(self._inotify.fd, self._on_file_events)
            self.set_interval(self._tick_s or LIVENESS_S, self.request_refresh)
        else:
            self.set_interval(self._tick_s or FALLBACK_S, self.request_refresh)
        self.request_refresh()

    def on_unmount(self) -> None:
        if self._inotify is not None:
            asyncio.get_running_loop().remove_reader(self._inotify.fd)
            self._inotify.close()

    @property
    def live_updates(self) -> str:
        return "inotify" if self._inotify is not None else f"every {self._tick_s or FALLBACK_S:g} s"

    def _on_file_events(self) -> None:
        if self._inotify is not None:
            self._inotify.read()
        self.request_refresh()

    def request_refresh(self) -> None:
        if self._busy:
            self._again = True  # one more snapshot after the one being taken covers every event meanwhile
            return
        self._busy = True
        self.run_worker(self._refresh(), group="snapshot", exclusive=False)

    async def _refresh(self) -> None:
        try:
            while True:
                self._again = False
                snap = await asyncio.to_thread(self.reader.take)
                if self._inotify is not None:
                    self._inotify.watch(await asyncio.to_thread(self.reader.watch_dirs))
                self.show(snap)
                if not self._again:
                    break
        finally:
            self._busy = False

    def show(self, snap: Snapshot) -> None:
        """Put the snapshot on screen, repainting only the headings and tables whose text changed."""
        self.snapshot = snap
        live = f"Agents ({agents_title(snap)})  ·  live updates: {self.live_updates}"
        self._set_heading("agents", live)
        self._set_heading("transports", f"Transports ({len(snap.transports)})")
        self._set_heading("traffic", f"Traffic ({len(snap.messages)} messages, newest first)")
        self._set_rows("agents", agent_rows(snap))
        self._set_rows("transports", [transport_row(t) for t in snap.transports])
        self._set_rows("traffic", [traffic_row(m) for m in reversed(snap.messages)])

    def _set_heading(self, name: str, text: str) -> None:
        if self._shown.get(f"{name}-heading") != text:
            self._shown[f"{name}-heading"] = text
            self.query_one(f"#{name}-heading", Static).update(text)

    def _set_rows(self, name: str, rows: list[tuple[str, ...]]) -> None:
        if self._shown.get(name) != rows:
            self._shown[name] = rows
            _fill(self.query_one(f"#{name}", DataTable), COLUMNS[name], rows)

    def action_refresh_now(self) -> None:
        self.request_refresh()

    def action_quit_watch(self) -> None:
        self.exit(0)


def _fill(table: DataTable[str], labels: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Replace the table's rows, each column exactly as wide as its widest cell or label, keeping the cursor on the
    same row index. The widths are set here, not left to DataTable's auto width: that is measured when the table
    next goes idle, and a table that got no message after its rows changed kept its old widths, cutting every cell
    to them."""
    widths = [max([cell_len(label), *(cell_len(r[i]) for r in rows)]) for i, label in enumerate(labels)]
    row = table.cursor_row
    if [c.width for c in table.ordered_columns] != widths:
        table.clear(columns=True)
        for label, width in zip(labels, widths, strict=True):
            table.add_column(label, width=width)
    else:
        table.clear()
    table.add_rows(rows)
    if rows:
        table.move_cursor(row=min(row, table.row_count - 1))
