"""OS-level utilities below every other layer: crash-safe writes, file locks, process identity from /proc. They
import nothing of crosstalk but core; the journal, the registry, the bus and the harness packages share them."""
