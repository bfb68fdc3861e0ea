"""The message core: records, ids, states and the Claude envelope. Pure: no I/O, no protocol SDK types."""
