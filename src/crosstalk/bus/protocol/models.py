"""The models registry: `data/crosstalk.yaml` → the models a dispatcher may run, and how to spawn them.

```yaml
providers:
  NAME:
    env_file: auth/NAME.env        # optional dotenv under the transport root (raw secrets, gitignored)
    env: {KEY: "${HOST_VAR}"}      # optional; only ${VAR} references — the file is committed, secrets are not
    timeout: 600                   # optional seconds per run (default 600, at most 86400)
    models:
      MODEL: "binary --flag ..."   # argv split on whitespace; quotes, pipes, $() stay literal (no shell)
```

One bad provider or model never darkens the rest: it lands on `Registry.skipped` with a readable reason and the
others load. Only an unreadable file or a YAML syntax error fails the whole load (the dispatcher then claims nothing).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from crosstalk.bus.errors import AmbiguousModel, ModelError, UnknownModel, UnsafeFile
from crosstalk.bus.protocol.safefs import SMALL_LIMIT, TEXT_LIMIT, load_yaml, read_transport_bytes, read_transport_text

CONFIG_PATH = "data/crosstalk.yaml"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# The keys a process environment can carry portably; also keeps typos like "KEY VALUE" out.
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_REF_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
PROVIDER_KEYS = ("env", "env_file", "models", "timeout")
DEFAULT_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 86400.0

# The C loader parses a large registry several times faster; the pure-Python one behaves the same.


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One runnable model. `env_file` is relative to the transport root; `env` maps KEY → "${VAR}" (unresolved)."""

    provider: str
    name: str
    argv: tuple[str, ...]
    env_file: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_S

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.name}"


@dataclass(frozen=True, slots=True)
class Skipped:
    """A provider (`what` = "NAME") or model (`what` = "PROVIDER/MODEL") left out, and why."""

    what: str
    reason: str

    def __str__(self) -> str:
        return f"{self.what}: {self.reason}"


@dataclass(slots=True)
class Registry:
    """`models` in file order; `skipped` the entries left out; `warnings` problems that do not skip anything."""

    models: list[ModelSpec] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[Skipped] = field(default_factory=list)


def load_registry(root: Path) -> Registry:
    """Read `<root>/data/crosstalk.yaml` (a regular file reached without symlinks, at most TEXT_LIMIT bytes, no
    YAML aliases). ModelError only when the file as a whole is unusable."""
    try:
        text = read_transport_text(root, CONFIG_PATH, TEXT_LIMIT)
    except FileNotFoundError:
        raise ModelError(f"{CONFIG_PATH} is missing in {root}") from None
    except UnsafeFile as exc:
        raise ModelError(exc.message) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read {CONFIG_PATH}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_registry(text, root=Path(root))


def parse_registry(text: str, *, root: Path | None = None) -> Registry:
    """Parse registry YAML. With `root`, a missing env_file is noted on `warnings` (it only fails at spawn)."""
    try:
        doc = load_yaml(text, CONFIG_PATH)  # a safe loader; aliases refused (no billion laughs)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise ModelError(f"{CONFIG_PATH}: YAML syntax error{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise ModelError(f"{CONFIG_PATH}: YAML error: {' '.join(str(exc).split())}") from None
    except (ValueError, TypeError) as exc:  # a scalar that cannot be built, such as the date 2026-13-45
        raise ModelError(f"{CONFIG_PATH}: YAML error: {' '.join(str(exc).split())}") from None
    registry = Registry()
    if doc is None:
        registry.warnings.append(Skipped(CONFIG_PATH, "the file is empty: no providers"))
        return registry
    if not isinstance(doc, dict):
        raise ModelError(f"{CONFIG_PATH}: the top level must be a mapping with a 'providers' key")
    for extra in doc:
        if extra != "providers":
            registry.warnings.append(Skipped(CONFIG_PATH, f"unknown top-level key {extra!r} ignored"))
    providers = doc.get("providers")
    if providers is None:
        registry.warnings.append(Skipped(CONFIG_PATH, "no providers declared"))
        return registry
    if not isinstance(providers, dict):
        raise ModelError(f"{CONFIG_PATH}: 'providers' must be a mapping of provider name to settings")
    for name, body in providers.items():
        _load_provider(registry, name, body, root)
    return registry


def _load_provider(registry: Registry, name: object, body: object, root: Path | None) -> None:
    def skip(reason: str) -> None:
        registry.skipped.append(Skipped(str(name), f"provider {name!r} skipped: {reason}"))

    if not isinstance(name, str):
        # YAML turns keys like 1234 or yes into numbers/booleans; quoting the key keeps it a name.
        skip("the provider name must be a string (quote it)")
        return
    if not NAME_RE.fullmatch(name):
        skip("the name must be 1-64 of A-Z a-z 0-9 . _ - and start with a letter or digit")
        return
    if not isinstance(body, dict):
        skip("its settings must be a mapping with a 'models' key")
        return
    unknown = sorted(str(k) for k in body if k not in PROVIDER_KEYS)
    if unknown:
        skip(f"unknown key {unknown[0]!r} (allowed: {', '.join(PROVIDER_KEYS)})")
        return
    reason = _check_env(body.get("env"))
    if reason:
        skip(reason)
        return
    env: dict[str, str] = dict(body.get("env") or {})
    env_file: Path | None = None
    if "env_file" in body:
        reason = _check_env_file(body["env_file"])
        if reason:
            skip(reason)
            return
        env_file = Path(body["env_file"])
        if root is not None and not (root / env_file).is_file():
            registry.warnings.append(
                Skipped(name, f"env_file {body['env_file']} of provider {name} is missing; its models fail at spawn")
            )
    timeout = DEFAULT_TIMEOUT_S
    if "timeout" in body:
        value = body["timeout"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_S:
            skip(f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, not {value!r}")
            return
        timeout = float(value)
    models = body.get("models")
    if not isinstance(models, dict) or not models:
        skip("it declares no models (expected 'models: {NAME: command}')")
        return
    for model, command in models.items():
        spec_or_reason = _load_model(name, model, command, env_file, env, timeout)
        if isinstance(spec_or_reason, ModelSpec):
            registry.models.append(spec_or_reason)
        else:
            registry.skipped.append(Skipped(f"{name}/{model}", f"model {name}/{model} skipped: {spec_or_reason}"))


def _check_env(env: object) -> str | None:
    """None when env is absent or maps variable names to exactly one ${VAR} reference each; else the reason."""
    if env is None:
        return None
    if not isinstance(env, dict):
        return "env must be a mapping of KEY to ${VAR}"
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_KEY_RE.fullmatch(key):
            return f"env key {key!r} is not a valid variable name"
        if not is_env_reference(value):
            # Never echo the value: it may be the very secret that must not sit in a committed file.
            return f"env {key}: raw values are refused; use ${{VAR}}"
    return None


def is_env_reference(value: object) -> bool:
    """True for a string that is exactly one `${VAR}` reference and nothing else."""
    return isinstance(value, str) and ENV_REF_RE.fullmatch(value) is not None


def _check_env_file(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return "env_file must be a non-empty relative path"
    pure = PurePosixPath(value)
    if pure.is_absolute() or value.startswith("~"):
        return f"env_file {value} must be a path relative to the transport root"
    if ".." in pure.parts or "\x00" in value:
        return f"env_file {value} must stay inside the transport (no '..')"
    return None


def _load_model(
    provider: str, model: object, command: object, env_file: Path | None, env: dict[str, str], timeout: float
) -> ModelSpec | str:
    """The ModelSpec, or the reason the model is skipped."""
    if not isinstance(model, str):
        return "the model name must be a string (quote it)"
    if not NAME_RE.fullmatch(model):
        return "the name must be 1-64 of A-Z a-z 0-9 . _ - and start with a letter or digit"
    if not isinstance(command, str) or not command.strip():
        return "its command must be a non-empty string"
    # The contract: whitespace-split argv, no shell and no shlex, so quotes reach the binary literally.
    argv = tuple(command.split())
    if "\x00" in command:
        return "its command contains a NUL character"
    first = argv[0]
    if "/" in first and not os.path.isabs(first):
        return f"command {first!r} is a relative path; use a name on PATH or an absolute path"
    return ModelSpec(provider, model, argv, env_file, dict(env), timeout)


def claim(registry: Registry, path_env: str | None) -> tuple[list[ModelSpec], list[Skipped]]:
    """The models this machine can run: a bare first token found on `path_env` (None: os.environ's PATH) or an
    absolute one that is an executable regular file. `skipped` holds the load-time skips followed by these."""
    claimed: list[ModelSpec] = []
    skipped = list(registry.skipped)
    for spec in registry.models:
        reason = unrunnable(spec.argv[0], path_env)
        if reason is None:
            claimed.append(spec)
        else:
            skipped.append(Skipped(spec.key, f"not claimed: {reason}"))
    return claimed, skipped


def unrunnable(binary: str, path_env: str | None) -> str | None:
    """Why this machine cannot run a model whose command starts with `binary`; None when it can."""
    if os.path.isabs(binary):
        try:
            st = os.stat(binary)
        except FileNotFoundError:
            return f"{binary} does not exist"
        except OSError as exc:
            return f"cannot stat {binary}: {exc.strerror or exc}"
        if not stat.S_ISREG(st.st_mode):
            return f"{binary} is not a regular file"
        if not os.access(binary, os.X_OK):
            return f"{binary} is not executable"
        return None
    if shutil.which(binary, path=path_env) is None:
        return f"{binary!r} is not on PATH"
    return None


def resolve(models: Sequence[ModelSpec] | Iterable[ModelSpec], name: str) -> ModelSpec:
    """Find `name`: "provider/model" exactly, or a bare "model" that exactly one of `models` carries."""
    models = list(models)
    if "/" in name:
        for spec in models:
            if spec.key == name:
                return spec
        raise UnknownModel(f"no claimed model {name!r}")
    matches = [spec for spec in models if spec.name == name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UnknownModel(f"no claimed model named {name!r}")
    choices = tuple(sorted(spec.key for spec in matches))
    raise AmbiguousModel(f"model {name!r} is ambiguous: {', '.join(choices)}", choices)


def spawn_env(
    spec: ModelSpec,
    base_env: Mapping[str, str],
    transport_root: Path,
    dispatch_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The model's environment, last wins: base (process env) → env_file → env (${VAR} from base) → dispatch_env."""
    env = dict(base_env)
    if spec.env_file is not None:
        env.update(_read_env_file(spec, Path(transport_root)))
    for key, ref in spec.env.items():
        match = ENV_REF_RE.fullmatch(ref)
        if match is None:  # load_registry refuses these; a hand-built spec must not leak a raw value either
            raise ModelError(f"env {key} of provider {spec.provider}: raw values are refused; use ${{VAR}}")
        var = match.group(1)
        if var not in base_env:
            raise ModelError(f"env {key} of provider {spec.provider}: ${{{var}}} is not set in the environment")
        env[key] = base_env[var]
    if dispatch_env:
        env.update(dispatch_env)
    return env


def _read_env_file(spec: ModelSpec, root: Path) -> dict[str, str]:
    """The provider's env_file, read only when it is a regular file inside the transport reached without symlinks
    (a committed symlink to ~/.ssh/id_rsa must not flow into a model's environment) and at most SMALL_LIMIT."""
    assert spec.env_file is not None
    rel = spec.env_file.as_posix()
    try:
        data = read_transport_bytes(root, rel, SMALL_LIMIT)
    except FileNotFoundError:
        raise ModelError(f"env_file {rel} of provider {spec.provider} is missing") from None
    except UnsafeFile as exc:
        raise ModelError(f"env_file of provider {spec.provider}: {exc.message}") from None
    except OSError as exc:
        raise ModelError(f"cannot read {rel}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ModelError(f"{rel} line {line}: not valid UTF-8") from None
    return parse_dotenv(text.removeprefix("\ufeff"), where=rel)


def parse_dotenv(text: str, *, where: str = "dotenv") -> dict[str, str]:
    """Parse the dotenv text of a provider's `env_file:`; `where` names the file in errors. Later duplicates of a
    key win, as in a shell.

    Rules: one `KEY=value` per line; lines whose first non-blank character is `#` are comments; blank lines are
    ignored; the value is everything after the first `=`, taken literally — no quotes, no escapes, no `${...}`
    expansion, and a `#` inside a value is part of it. Anything else is refused with the file and line number,
    because a silently skipped line would surface much later as a confusing auth failure of the model CLI."""
    values: dict[str, str] = {}
    # Split on "\n" only: str.splitlines() would also break on \x0b, \x1c, \u2028... which may sit inside a value.
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw  # tolerate CRLF files
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep:
            raise ModelError(f"{where} line {number}: expected KEY=value")
        if not ENV_KEY_RE.fullmatch(key):
            raise ModelError(f"{where} line {number}: {key!r} is not a valid variable name")
        if "\x00" in value:
            # execve cannot carry a NUL; failing here names the line instead of failing at spawn.
            raise ModelError(f"{where} line {number}: the value of {key} contains a NUL character")
        values[key] = value
    return values
