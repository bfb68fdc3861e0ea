"""Journal-backed tasks: what an A2A sender sees of a message it sent (state, history, reply).

The A2A ingress (ingress/a2a/) translates the protocol to and from these records; nothing here imports an SDK.
"""
