"""A transport as this machine holds it: the registered checkouts (init, clone, list, remove), the machine-local
state beside each one (cursor, pid, locks, the wake socket), and the writes and reads of its files through git:
publishing messages, reading them and their reply status, channels, the `crosstalk chat` conversation and edits of
the models registry. Built on crosstalk.bus.protocol and crosstalk.bus.git."""
