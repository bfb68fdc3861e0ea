"""The git bus (protocol v7): transports, channels and messages in a git repository, and their dispatcher."""
