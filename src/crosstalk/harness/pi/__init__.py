"""The pi harness: a pi session's agent is hosted by the core process the crosstalk pi extension starts
(`crosstalk pi-agent`), and delivers through the extension's own queue over the pi link (docs/dev/pi-link.md)."""

from crosstalk.harness.pi.kind import KIND

__all__ = ["KIND"]
