"""One exception tree: every error crosstalk defines derives from CrosstalkError, says its kind one way (`code`), and
each kind leaves through one row of core.errors.ERROR_TABLE. The table keeps the exit codes and wire codes the CLI
and the wires answered before it existed (they are public: README and docs/cli.md list the exit codes)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import crosstalk
from crosstalk.bus import errors as bus_errors
from crosstalk.core.errors import ERROR_TABLE, CrosstalkError, ErrorKind, TaskError, exit_code, jsonrpc_code
from crosstalk.ingress.errors import A2ARefused, AgentUnreachable, DeliveryError, WireError

REPO = Path(__file__).resolve().parents[2]


def _exception_classes() -> list[type[BaseException]]:
    for info in pkgutil.walk_packages(crosstalk.__path__, "crosstalk."):
        if not info.name.endswith("__main__"):  # running the CLI is not importing it
            importlib.import_module(info.name)
    found = []
    for name, module in sorted(sys.modules.items()):
        if name == "crosstalk" or name.startswith("crosstalk."):
            found += [
                obj
                for obj in vars(module).values()
                if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name
            ]
    return found


CLASSES = _exception_classes()


def test_the_walk_finds_the_errors_of_every_layer():
    modules = {cls.__module__ for cls in CLASSES}
    assert {"crosstalk.core.errors", "crosstalk.bus.errors", "crosstalk.cli.common", "crosstalk.shim.pool"} <= modules
    assert len(CLASSES) > 50


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_error_derives_from_crosstalk_error_and_has_one_row(cls: type[BaseException]):
    assert issubclass(cls, CrosstalkError)
    assert isinstance(cls.code, ErrorKind) and cls.code in ERROR_TABLE
    assert not hasattr(cls, "exit_code"), "the exit code comes from the table, never from the error"


def test_each_kind_has_exactly_one_row():
    assert set(ERROR_TABLE) == set(ErrorKind)
    assert len(ERROR_TABLE) == len(ErrorKind)


def test_each_layer_keeps_its_errors_in_one_module():
    """Private control-flow errors (a leading underscore) may stay in the one module that raises and catches them."""
    homes: dict[str, set[str]] = {}
    for cls in CLASSES:
        if not cls.__name__.startswith("_"):
            layer = cls.__module__.split(".")[1]
            homes.setdefault(layer, set()).add(cls.__module__)
    assert {layer: mods for layer, mods in homes.items() if len(mods) > 1} == {}


def test_the_table_keeps_the_public_exit_codes_and_wire_codes():
    assert {kind.value: (row.exit, row.jsonrpc) for kind, row in ERROR_TABLE.items()} == {
        "failed": (1, -32603),
        "usage": (2, -32602),
        "rejected": (3, -32600),
        "no_agent": (4, -32603),
        "held": (5, -32603),
        "unauthenticated": (3, -32000),
        "task_not_found": (1, -32001),
        "task_not_cancelable": (1, -32002),
        "unsupported_operation": (1, -32004),
        "invalid_request": (3, -32600),
        "invalid_params": (1, -32602),
        "internal_error": (1, -32603),
        "parse_error": (1, -32700),
        "method_not_found": (1, -32601),
        "no_such_message": (1, -32603),
        "not_an_ask": (1, -32603),
        "already_replied": (1, -32603),
        "ask_closed": (1, -32603),
    }


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_the_documented_exit_codes_are_the_tables(doc: str):
    text = " ".join((REPO / doc).read_text().split())
    line = text[text.index("Exit codes") :][:400]
    documented = {int(n): what for n, what in re.findall(r"(\d) ([a-z/]+)", line)}
    assert documented[1].startswith("wire") and exit_code(ErrorKind.FAILED) == 1
    assert documented[2] == "usage" and exit_code(ErrorKind.USAGE) == 2
    assert documented[3] == "rejected" and exit_code(ErrorKind.REJECTED) == 3
    assert documented[4] == "no" and exit_code(ErrorKind.NO_AGENT) == 4
    assert documented[5] == "held" and exit_code(ErrorKind.HELD) == 5


def test_delivery_errors_exit_as_they_did():
    # Before the table each carried its own exit_code: 1, 4, 1 and 3.
    assert [exit_code(cls.code) for cls in (DeliveryError, AgentUnreachable, WireError, A2ARefused)] == [1, 4, 1, 3]


def test_task_errors_exit_as_they_did():
    # `send --a2a` exited 3 for a refused request (invalid_request) and 1 for every other task error.
    for kind in (TaskError.NOT_FOUND, TaskError.NOT_CANCELABLE, TaskError.UNSUPPORTED, TaskError.INVALID_PARAMS):
        assert exit_code(TaskError(kind, "x").code) == 1
    assert exit_code(TaskError(TaskError.INTERNAL, "x").code) == 1
    assert exit_code(TaskError(TaskError.INVALID, "x").code) == 3


def test_bus_errors_exit_as_they_did():
    # The bus commands exited 2 for what the user fixes on the command line, 1 for every other bus error.
    usage = {bus_errors.UnknownTransport, bus_errors.AmbiguousTransport, bus_errors.ChannelError}
    usage |= {bus_errors.UnknownModel, bus_errors.AmbiguousModel}
    for cls in CLASSES:
        if issubclass(cls, bus_errors.BusError):
            assert exit_code(cls.code) == (2 if cls in usage else 1), cls


def test_the_wires_answer_the_tables_codes():
    from a2a.utils import errors as sdk

    from crosstalk.ingress.a2a import gate
    from crosstalk.ingress.a2a.convert import task_error_to_a2a
    from crosstalk.shim import jsonrpc as protocol

    # MCP (JSON-RPC 2.0's own codes)
    assert (protocol.PARSE_ERROR, protocol.INVALID_REQUEST, protocol.METHOD_NOT_FOUND) == (-32700, -32600, -32601)
    assert (protocol.INVALID_PARAMS, protocol.INTERNAL_ERROR) == (-32602, -32603)
    # A2A: the edge gate's own answers, and the SDK error each task kind is answered with
    assert (gate.UNAUTHENTICATED_CODE, gate.PARSE_ERROR_CODE) == (-32000, -32700)
    expected = {
        TaskError.NOT_FOUND: sdk.TaskNotFoundError,
        TaskError.NOT_CANCELABLE: sdk.TaskNotCancelableError,
        TaskError.UNSUPPORTED: sdk.UnsupportedOperationError,
        TaskError.INVALID: sdk.InvalidRequestError,
        TaskError.INVALID_PARAMS: sdk.InvalidParamsError,
        TaskError.INTERNAL: sdk.InternalError,
    }
    for kind, cls in expected.items():
        answer = task_error_to_a2a(TaskError(kind, "why"))
        assert type(answer) is cls and sdk.JSON_RPC_ERROR_CODE_MAP[cls] == jsonrpc_code(kind)


def test_an_error_says_its_message_in_one_line():
    assert bus_errors.GitError("fatal:\nno remote").message == "fatal: no remote"
    assert TaskError(TaskError.NOT_FOUND, "no task t-1 of yours here").message == "no task t-1 of yours here"
    assert f"{TaskError.NOT_FOUND}" == "task_not_found"  # the kind's value is what travels on the wire
