"""The bus's errors: each carries one line saying what is wrong, which the CLI prints as `crosstalk: <message>`."""

from __future__ import annotations


class BusError(Exception):
    """Base of every bus error; `.message` is a single line."""

    def __init__(self, message: str) -> None:
        # A multi-line message would break the one-line error contract of the CLI.
        self.message = " ".join(message.split("\n")).strip()
        super().__init__(self.message)


class NotATransport(BusError):
    """A directory without CROSSTALK-VERSION (or not a git work tree)."""


class VersionMismatch(BusError):
    """The transport speaks another protocol version than this crosstalk."""


class UnknownTransport(BusError):
    """No transport could be chosen (none known, several known, or a name nobody registered)."""


class AmbiguousTransport(UnknownTransport):
    """Several transports are known and none was named."""


class ChannelError(BusError):
    """A bad channel name, an unknown handle, a name collision."""


class MessageFormatError(BusError):
    """A message file whose front matter breaks the protocol."""


class ModelError(BusError):
    """A models-registry problem (bad entry, missing ${VAR}, unresolvable address)."""


class AmbiguousModel(ModelError):
    """A bare model name that several claimed providers offer; `choices` lists their provider/model keys."""

    def __init__(self, message: str, choices: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.choices = choices


class UnknownModel(ModelError):
    """A model name nobody claims."""


class GitError(BusError):
    """A git command failed; the message carries git's last stderr line."""
