"""The git bus (protocol v7): transports, channels and messages in a git repository, and their dispatcher.

Sub-packages, bottom to top (each imports only those before it; tests/unit/bus/test_bus_layering.py holds it):
errors (the bus's error classes, a module), git (the git wrapper and the transport lock), protocol (the committed
format: layout, messages, addresses, the models registry, safe reading), transport (registered checkouts, their
machine-local state, publishing and reading messages, channels), runs (the scan and one model run), live (the bridge
to live agents), workflow (fan-out and synthesis), dispatch (the dispatcher's tick, loop and process).
"""
