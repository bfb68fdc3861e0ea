"""The one receiver chain: every ingress hands it an Inbound and gets one Outcome (receiver/chain.py)."""

from crosstalk.receiver.chain import INJECT_TIMEOUT_S, Listener, Receiver
from crosstalk.receiver.inbound import NOTICE_TRANSPORT, AgentIdentity, ChainStats, Inbound

__all__ = ["INJECT_TIMEOUT_S", "NOTICE_TRANSPORT", "AgentIdentity", "ChainStats", "Inbound", "Listener", "Receiver"]
