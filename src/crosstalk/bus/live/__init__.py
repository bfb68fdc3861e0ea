"""The bridge between the bus and live crosstalk agents on this machine: a channel message `to: NAME@ALIAS`
delivered into the agent's session through its receiver chain, a live agent's message to a bus model written as a
channel message, and the messages held while their agent is down. Uses protocol and transport; the dispatcher
(crosstalk.bus.dispatch.relay) and the shim call it."""
