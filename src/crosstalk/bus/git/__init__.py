"""git for the bus: every git command with its timeout and one meaningful error line (command), one transport's
work tree with its commits, sync and racing push (repo), and the per-transport lock around git mutations with the
repair of what a killed git leaves behind (locks). Knows nothing of the protocol: it imports only
crosstalk.bus.errors below it."""
