"""The JSON-RPC envelope the MCP server sorts every decoded message with: requests, notifications, a client's
responses, and the error answered at once for anything malformed."""

from __future__ import annotations

from typing import Any

import pytest

from crosstalk.shim import jsonrpc as rpc


def test_a_request_and_a_notification() -> None:
    assert rpc.classify({"jsonrpc": "2.0", "id": 7, "method": "ping"}) == rpc.Request(7, "ping", {})
    assert rpc.classify({"id": "a", "method": "tools/list", "params": {"cursor": "x"}}) == rpc.Request(
        "a", "tools/list", {"cursor": "x"}
    )
    assert rpc.classify({"method": "notifications/cancelled", "params": 3}) == rpc.Notification(
        "notifications/cancelled", 3
    )


def test_a_response_from_the_client_is_dropped() -> None:
    assert rpc.classify({"jsonrpc": "2.0", "id": 1, "result": {}}) is None


@pytest.mark.parametrize(
    ("msg", "rid", "code"),
    [
        ([1], None, rpc.INVALID_REQUEST),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1, rpc.INVALID_REQUEST),
        ({"id": 2, "method": 5}, 2, rpc.INVALID_REQUEST),
        ({"id": True, "method": "ping"}, None, rpc.INVALID_REQUEST),
        ({"id": 1.5, "method": "ping"}, None, rpc.INVALID_REQUEST),
        ({"id": 3, "method": "ping", "params": [1]}, 3, rpc.INVALID_PARAMS),
    ],
)
def test_a_malformed_message_is_answered_at_once(msg: Any, rid: Any, code: int) -> None:
    answer = rpc.classify(msg)
    assert isinstance(answer, dict)
    assert (answer["jsonrpc"], answer["id"], answer["error"]["code"]) == ("2.0", rid, code)


def test_error_data_only_when_given() -> None:
    assert rpc.error(1, rpc.METHOD_NOT_FOUND, "Method not found")["error"] == {
        "code": -32601,
        "message": "Method not found",
    }
    assert rpc.error(None, rpc.PARSE_ERROR, "bad", {"x": 1})["error"]["data"] == {"x": 1}
