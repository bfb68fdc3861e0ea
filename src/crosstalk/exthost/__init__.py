"""The extension-harness host: the crosstalk core a harness starts when it loads crosstalk as an in-process extension
(pi today) and talks to over a link. One core hosts one session's agent: it registers it, serves the extension's
requests through the tools every session gets (shim/tools.py, handed in by the command that starts it), delivers
into the session through the harness's adapter, and keeps the session's settings across resumes.

What is harness-neutral lives here (exthost/core.py: the runtime; exthost/settings.py: the saved settings); what a
harness adds (its link, its adapter, its environment's names) comes from its own package and its command
(harness/pi/, cli/pi_cmd.py).
"""

from crosstalk.exthost.core import ExtensionCore, ExtensionHarness, Link, SessionTools

__all__ = ["ExtensionCore", "ExtensionHarness", "Link", "SessionTools"]
