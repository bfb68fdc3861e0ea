"""Ingresses: the edges where messages enter an agent's receiver chain (the uds socket, A2A 1.0), and the client
that sends to them."""
