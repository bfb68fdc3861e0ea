"""Live messages across machines through a NATS relay the user runs (docs/dev/relay.md): the join, the frames, the
relay process that hands each message to this machine's one receiver chain, and the sending side."""
