"""`crosstalk relay join`'s proof before it saves anything: this machine connects with its credentials, and the
server lets it send under its own alias, take its own alias's requests, answer them and hear the answers (every
grant docs/relay.md lists), proven by one request to itself. Without a grant the machine could join and never hear
a message, so a missing one is a clear error now."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from crosstalk.relay.config import RelayConfig, RelayConfigError
from crosstalk.relay.errors import JoinRefused
from crosstalk.relay.link import Link, describe
from crosstalk.relay.wire import inbound_subject, inbox_prefix, msg_subject

CHECK_TIMEOUT_S = 5.0


async def check_join_async(config: RelayConfig) -> None:
    link = Link(config)
    try:
        try:
            await link.connect(keep_trying=False, name=f"crosstalk relay join {config.alias}")
        except RelayConfigError:
            raise
        except Exception as exc:
            why = describe(link.last_error or exc)
            raise JoinRefused(f"cannot join the relay {config.url}: {why}; nothing was saved") from None
        token = os.urandom(16).hex().encode()
        inbox = f"{inbox_prefix(config.alias)}.join-check.{token.decode()}"
        proven = asyncio.Event()

        async def answer(msg: Any) -> None:
            if msg.data == token and msg.reply:  # ours; a relay process serving here already answers the rest
                await msg.respond(token)

        async def heard(msg: Any) -> None:
            if msg.data == token:
                proven.set()

        # Positive proof, not the absence of an error (the server may report a violation after a ping's answer):
        # our own request, published as this alias, heard on this alias's subject, answered, and the answer heard.
        await link.nc.subscribe(inbound_subject(config.alias), cb=answer)
        await link.nc.subscribe(inbox, cb=heard)
        await link.nc.publish(msg_subject(config.alias, config.alias), token, reply=inbox)
        _, waiting = await asyncio.wait(
            {asyncio.ensure_future(proven.wait()), asyncio.ensure_future(link.refused.wait())},
            timeout=CHECK_TIMEOUT_S,
            return_when=asyncio.FIRST_COMPLETED,
        )
        for pending in waiting:
            pending.cancel()
        if link.permission_errors:
            raise JoinRefused(
                f"the relay lets this user in but not as machine {config.alias!r} ({link.permission_errors[0]}); "
                f"its permissions must allow publish crosstalk.v1.msg.*.{config.alias}, subscribe "
                f"{inbound_subject(config.alias)} and {inbox_prefix(config.alias)}.>, and allow_responses "
                "(docs/relay.md), or join with the alias they grant"
            )
        if not proven.is_set():
            raise JoinRefused(
                f"the relay {config.url} did not carry a check message as {config.alias!r} and back within "
                f"{CHECK_TIMEOUT_S:g} s; nothing was saved"
            )
    finally:
        await link.close()


def check_join(config: RelayConfig) -> None:
    asyncio.run(check_join_async(config))
