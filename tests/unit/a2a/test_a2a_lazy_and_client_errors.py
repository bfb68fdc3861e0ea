"""The package imports nothing heavy until used; the client maps SDK and transport failures to crosstalk errors."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

from crosstalk.core.errors import TaskError
from crosstalk.ingress.a2a.client import _a2a_error, _httpx_error, _transport_error
from crosstalk.ingress.errors import A2AAuthError, A2AOutcomeUnknown, A2AProtocolError, A2AUnreachable

URL = "http://127.0.0.1:9/"


def test_importing_the_package_loads_no_sdk():
    code = (
        "import sys, json\n"
        "import crosstalk.ingress.a2a as pkg\n"
        "from crosstalk.ingress.a2a import A2AUnreachable, A2AAuthError\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('a2a', 'uvicorn', 'starlette', 'httpx', "
        "'google', 'pydantic'))\n"
        "before = heavy\n"
        "pkg.A2AClient\n"
        "after = 'a2a.client' in sys.modules\n"
        "print(json.dumps([before, after]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    before, after = json.loads(out.stdout)
    assert before == [] and after is True


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TaskNotFoundError("no task t"), TaskError.NOT_FOUND),
        (TaskNotCancelableError("t is completed"), TaskError.NOT_CANCELABLE),
        (UnsupportedOperationError("t is terminal"), TaskError.UNSUPPORTED),
        (InvalidRequestError("over the admission limit"), TaskError.INVALID),
        (InvalidParamsError("message.parts[0]: only text"), TaskError.INVALID),
        (ContentTypeNotSupportedError("image/png"), TaskError.INVALID),
    ],
)
def test_task_level_sdk_errors_become_task_errors(error, code):
    mapped = _a2a_error(error)
    assert isinstance(mapped, TaskError) and mapped.code == code and mapped.message == error.message


@pytest.mark.parametrize(
    ("error", "code"),
    [(VersionNotSupportedError("0.3"), -32009), (MethodNotFoundError(), -32601), (InternalError("x"), -32603)],
)
def test_other_sdk_errors_are_protocol_errors_with_their_code(error, code):
    mapped = _a2a_error(error)
    assert isinstance(mapped, A2AProtocolError) and mapped.jsonrpc_code == code


def status_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", URL)
    return httpx.HTTPStatusError("x", request=request, response=httpx.Response(status, request=request))


def wrapped(cause: Exception, cls=A2AClientError) -> A2AClientError:
    try:
        try:
            raise cause
        except Exception as exc:
            raise cls(f"wrapped {exc}") from exc
    except A2AClientError as outer:
        return outer


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        (status_error(401), A2AAuthError),
        (status_error(403), A2AAuthError),
        (status_error(404), A2AProtocolError),
        (status_error(500), A2AOutcomeUnknown),
        (status_error(503), A2AOutcomeUnknown),
        (httpx.ConnectError("refused"), A2AUnreachable),
        (httpx.ConnectTimeout("slow"), A2AUnreachable),
        (httpx.ReadTimeout("slow"), A2AOutcomeUnknown),
        (httpx.RemoteProtocolError("dropped"), A2AOutcomeUnknown),
        (httpx.ReadError("reset"), A2AOutcomeUnknown),
    ],
)
def test_transport_failures_map_by_their_cause(cause, expected):
    cls = A2AClientTimeoutError if isinstance(cause, httpx.TimeoutException) else A2AClientError
    mapped = _transport_error(wrapped(cause, cls), URL)
    assert type(mapped) is expected
    assert type(_httpx_error(cause, URL)) is expected


def test_connect_failures_are_not_outcome_unknown():
    assert not isinstance(_httpx_error(httpx.ConnectError("x"), URL), A2AOutcomeUnknown)
    assert isinstance(_httpx_error(httpx.ReadTimeout("x"), URL), A2AUnreachable)  # still catchable as unreachable


def test_a_closed_client_and_a_bad_body_are_named():
    assert isinstance(_transport_error(A2AClientError("HTTP client is closed"), URL), A2AUnreachable)
    assert isinstance(_transport_error(A2AClientError("Invalid JSON-RPC response"), URL), A2AProtocolError)
