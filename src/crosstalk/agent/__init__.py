"""One live agent: registration, journal, receiver chain, ingresses, harness adapter and claims (agent/host.py)."""

from crosstalk.agent.config import AgentConfig, SessionReply
from crosstalk.agent.host import AgentHost
from crosstalk.agent.routes import INFORM_ROUTE_TTL_S, ROUTED_STATES

__all__ = ["INFORM_ROUTE_TTL_S", "ROUTED_STATES", "AgentConfig", "AgentHost", "SessionReply"]
