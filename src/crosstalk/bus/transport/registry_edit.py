"""Editing the models registry (`data/crosstalk.yaml`) for `crosstalk model add|remove`, keeping its comments.

The file is changed with ruamel.yaml's round-trip mode, so the comments and layout a person wrote stay; every edit
is checked with the registry's own parser (`parse_registry`) before anything is written, and committed and pushed
like every other bus write (store.publish, under the transport lock, after pulling the remote's newest registry).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from crosstalk.bus.errors import GitError, ModelError, UnsafeFile
from crosstalk.bus.git.locks import transport_lock
from crosstalk.bus.protocol.models import CONFIG_PATH, NAME_RE, ModelSpec, parse_registry
from crosstalk.bus.protocol.safefs import TEXT_LIMIT, read_transport_text
from crosstalk.bus.transport.store import PublishResult, publish
from crosstalk.bus.transport.transports import Transport

EMPTY_REGISTRY = "providers:\n"


@dataclass(frozen=True, slots=True)
class RegistryChange:
    text: str  # the new file
    spec: ModelSpec | None  # the model as the registry now reads it (add), None (remove)
    note: str | None = None  # what else changed, for the person (a provider removed with its last model)


def parse_key(key: str) -> tuple[str, str]:
    """("anthropic", "sonnet") from "anthropic/sonnet"; ModelError naming the problem."""
    provider, sep, name = key.partition("/")
    if not sep:
        raise ModelError(f"model {key!r} needs a provider: PROVIDER/NAME (for example anthropic/sonnet)")
    for what, part in (("provider", provider), ("model", name)):
        if not NAME_RE.fullmatch(part):
            raise ModelError(
                f"{what} name {part!r} is not valid: 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit"
            )
    return provider, name


def command_line(argv: Sequence[str]) -> str:
    """The registry's form of a command: its arguments joined by single spaces (the registry splits on
    whitespace, with no shell and no quoting, so an argument holding whitespace cannot be written)."""
    if not argv:
        raise ModelError("no command given: put it after '--' (crosstalk model add PROVIDER/NAME -- COMMAND...)")
    for arg in argv:
        if not arg or any(ch.isspace() for ch in arg) or "\x00" in arg:
            raise ModelError(
                f"command argument {arg!r} is empty or holds whitespace; the registry splits commands on "
                "whitespace (no shell, no quoting), so it cannot be written"
            )
    return " ".join(argv)


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip: comments, key order and quoting survive
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long command onto a second line
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _scalar(value: str) -> Any:
    """`value` as ruamel should write it: plain when the registry's YAML 1.1 reader takes it back as this very string,
    else single-quoted (ruamel writes YAML 1.2, where `yes`, `on` or `2026-01-01` stay strings; PyYAML would read a
    boolean or a date)."""
    import yaml
    from ruamel.yaml.scalarstring import SingleQuotedScalarString

    try:
        plain = yaml.safe_load(value) == value
    except yaml.YAMLError:
        plain = False
    return value if plain else SingleQuotedScalarString(value)


def _load(text: str) -> Any:
    parse_registry(text)  # refuses what the dispatcher would (YAML errors, aliases) before ruamel reads it
    doc = _yaml().load(text)
    if doc is None:  # empty, or comments only: they stay above the new providers key
        doc = _yaml().load(f"{text.rstrip()}\n{EMPTY_REGISTRY}" if text.strip() else EMPTY_REGISTRY)
    if not hasattr(doc, "get"):
        raise ModelError(f"{CONFIG_PATH}: the top level must be a mapping with a 'providers' key")
    if doc.get("providers") is None:
        doc["providers"] = {}
    if not hasattr(doc["providers"], "get"):
        raise ModelError(f"{CONFIG_PATH}: 'providers' must be a mapping of provider name to settings")
    return doc


def _dump(doc: Any) -> str:
    out = io.StringIO()
    _yaml().dump(doc, out)
    return out.getvalue()


def add_model(text: str, key: str, argv: Sequence[str], *, replace: bool = False) -> RegistryChange:
    """The registry text with model `key` running `argv` (a new provider is created as needed)."""
    provider, name = parse_key(key)
    command = command_line(argv)
    doc = _load(text)
    providers = doc["providers"]
    body = providers.get(provider)
    if body is None:
        providers[_scalar(provider)] = {"models": {}}
        body = providers[provider]
    if not hasattr(body, "get"):
        raise ModelError(f"{CONFIG_PATH}: provider {provider!r} is not a mapping; fix it by hand first")
    if body.get("models") is None:
        body["models"] = {}
    models = body["models"]
    if not hasattr(models, "get"):
        raise ModelError(f"{CONFIG_PATH}: the models of provider {provider!r} are not a mapping; fix it by hand first")
    if name in models and not replace:
        raise ModelError(f"model {key} is already in {CONFIG_PATH} ({models[name]}); pass --replace to change it")
    if name in models:
        models[name] = _scalar(command)
    else:
        models[_scalar(name)] = _scalar(command)
    new_text = _dump(doc)
    registry = parse_registry(new_text)
    spec = next((s for s in registry.models if s.key == key), None)
    if spec is None:
        reason = next((s.reason for s in registry.skipped if s.what in (key, provider)), "the registry skips it")
        raise ModelError(f"not added: {reason}")
    if spec.argv != tuple(argv):
        raise ModelError(f"not added: the registry would read the command as {' '.join(spec.argv)!r}")
    return RegistryChange(new_text, spec)


def remove_model(text: str, key: str) -> RegistryChange:
    """The registry text without model `key`; a provider left with no models goes too."""
    provider, name = parse_key(key)
    doc = _load(text)
    body = doc["providers"].get(provider)
    models = body.get("models") if hasattr(body, "get") else None
    if not isinstance(models, dict) or name not in models:
        raise ModelError(f"no model {key} in {CONFIG_PATH}")
    del models[name]
    note = None
    if not models:
        del doc["providers"][provider]
        note = f"provider {provider} had no other model and was removed with it"
    new_text = _dump(doc)
    parse_registry(new_text)
    return RegistryChange(new_text, None, note)


def read_registry_text(transport: Transport) -> str:
    try:
        return read_transport_text(transport.root, CONFIG_PATH, TEXT_LIMIT)
    except FileNotFoundError:
        return EMPTY_REGISTRY
    except UnsafeFile as exc:
        raise ModelError(exc.message) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read {CONFIG_PATH}: {getattr(exc, 'strerror', None) or exc}") from None


def edit_registry(
    transport: Transport, edit: Callable[[str], RegistryChange], summary: str
) -> tuple[RegistryChange, PublishResult]:
    """Under the transport lock: pull (best effort: an unreachable remote is reported by the push), apply `edit` to
    the newest registry, commit and push it. A registry with uncommitted changes is refused (ModelError): the
    commit would carry a person's unfinished edit."""
    with transport_lock(transport.root):
        repo = transport.git()
        if repo.has_remote():
            try:
                repo.sync(remote_checked=True)
            except GitError:
                pass
        if repo.run("status", "--porcelain", "--", CONFIG_PATH).strip():
            raise ModelError(
                f"{CONFIG_PATH} has changes that are not committed; commit or discard them first "
                f"(git -C {transport.root} diff -- {CONFIG_PATH}): this command commits the whole file"
            )
        change = edit(read_registry_text(transport))
        result = publish(transport, {CONFIG_PATH: change.text}, summary)
    return change, result
