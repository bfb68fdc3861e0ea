"""Ingresses: the edges where messages enter an agent's receiver chain (uds now; A2A and the bus later)."""
