"""The injector: one adapter call, every way it can end mapped to exactly one delivery state (harness/base.py)."""

from __future__ import annotations

import asyncio
import logging

from crosstalk.core.states import State
from crosstalk.fs import trace
from crosstalk.harness.base import INJECT_STATES, HarnessAdapter, InjectRequest, InjectResult
from crosstalk.harness.errors import HarnessDisconnected, HarnessError, HarnessRefused, PreSendFailure, ReceiverRefused

log = logging.getLogger(__name__)


async def inject(adapter: HarnessAdapter, request: InjectRequest, timeout_s: float) -> InjectResult:
    trace.mark("inject", mid=request.message.message_id)
    try:
        async with asyncio.timeout(timeout_s):
            result = await adapter.inject(request)
    except ReceiverRefused as exc:
        return InjectResult(State.REJECTED, exc.reason, {"withheld": "receiver_settings"})
    except (HarnessRefused, PreSendFailure) as exc:
        return InjectResult(State.UNREACHABLE, exc.reason)
    except HarnessDisconnected as exc:
        return InjectResult(State.UNKNOWN, exc.reason)
    except HarnessError as exc:
        return InjectResult(State.UNKNOWN, exc.reason)
    except TimeoutError:
        return InjectResult(State.UNKNOWN, "inject_timeout")
    except Exception as exc:  # an adapter bug may have written already: unknown, never resent
        log.exception("adapter raised")
        return InjectResult(State.UNKNOWN, f"adapter_error: {type(exc).__name__}")
    if not isinstance(result, InjectResult) or result.state not in INJECT_STATES:
        return InjectResult(State.UNKNOWN, "malformed_harness_answer")
    return result
