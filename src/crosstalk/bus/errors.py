"""The bus's errors: each carries one line saying what is wrong, which the CLI prints as `crosstalk: <message>`.
Those the user fixes by changing the command line (an unknown transport, channel or model) are usage errors."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError, ErrorKind


class BusError(CrosstalkError):
    """Base of every bus error; its `message` is a single line."""

    def __init__(self, message: str) -> None:
        # A multi-line message would break the one-line error contract of the CLI.
        super().__init__(" ".join(message.split("\n")).strip())


class NotATransport(BusError):
    """A directory without CROSSTALK-VERSION (or not a git work tree)."""


class VersionMismatch(BusError):
    """The transport speaks another protocol version than this crosstalk."""


class UnknownTransport(BusError):
    """No transport could be chosen (none known, several known, or a name nobody registered)."""

    code = ErrorKind.USAGE


class AmbiguousTransport(UnknownTransport):
    """Several transports are known and none was named."""


class ChannelError(BusError):
    """A bad channel name, an unknown handle, a name collision."""

    code = ErrorKind.USAGE


class MessageFormatError(BusError):
    """A message file whose front matter breaks the protocol."""


class ModelError(BusError):
    """A models-registry problem (bad entry, missing ${VAR}, unresolvable address)."""


class AmbiguousModel(ModelError):
    """A bare model name that several claimed providers offer; `choices` lists their provider/model keys."""

    code = ErrorKind.USAGE

    def __init__(self, message: str, choices: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.choices = choices


class UnknownModel(ModelError):
    """A model name nobody claims."""

    code = ErrorKind.USAGE


class GitError(BusError):
    """A git command failed; the message carries git's last stderr line."""


class Interrupted(BusError):
    """A model run was ended because the dispatcher is stopping: its batch stays pending."""


class AlreadyRunning(BusError):
    """Another live dispatcher holds this transport's dispatcher.lock on this machine."""


class UnsafeFile(BusError):
    """A transport file the bus refuses to read: a symlink on its path, not a regular file, or over the cap."""


class ServerError(BusError):
    """The dispatcher could not be started or stopped."""


class PlanError(BusError):
    """The compile output is not a valid plan (the workflow fails, saying why)."""
