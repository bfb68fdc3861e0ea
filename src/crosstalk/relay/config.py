"""What `crosstalk relay join` saves for one state root, and the checks it makes first: the URL (a non-loopback one
must use TLS; credentials never in it), the alias (one NATS subject token), the credentials file (a regular file of
this user's, mode 0600, in one of the forms below). No NATS import here: `crosstalk send` reads this on its path."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.errors import NotRegularFile
from crosstalk.fs.reading import open_regular, read_fd_capped
from crosstalk.registry.paths import StatePaths, ensure_private_dir
from crosstalk.relay.errors import RelayConfigError as RelayConfigError

ALIAS_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
SCHEMES = {"nats": False, "tls": True, "ws": False, "wss": True}  # scheme -> encrypted
MAX_CREDS_BYTES = 16 * 1024
MAX_CONFIG_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class RelayConfig:
    url: str
    alias: str
    creds: str | None  # absolute path of the credentials file, or None (a server without authentication)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "alias": self.alias, "creds": self.creds}


@dataclass(frozen=True, slots=True)
class Credentials:
    """What connects as this machine: exactly one of user+password, token, nkey seed, or a NATS .creds file."""

    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey_seed: str | None = None
    creds_file: str | None = None

    def connect_options(self) -> dict[str, Any]:
        if self.creds_file:
            return {"user_credentials": self.creds_file}
        if self.nkey_seed:
            return {"nkeys_seed_str": self.nkey_seed}
        if self.token:
            return {"token": self.token}
        if self.user:
            return {"user": self.user, "password": self.password or ""}
        return {}


def relay_dir(paths: StatePaths) -> Path:
    return paths.root / "relay"


def config_path(paths: StatePaths) -> Path:
    return relay_dir(paths) / "relay.json"


def status_path(paths: StatePaths) -> Path:
    return relay_dir(paths) / "status.json"


def serve_lock_path(paths: StatePaths) -> Path:
    return relay_dir(paths) / "serve.lock"


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str) -> str:
    """The URL as saved, or RelayConfigError: a known scheme, a host, no credentials, TLS beyond loopback."""
    parts = urlsplit(url.strip())
    if parts.scheme not in SCHEMES:
        raise RelayConfigError(f"relay URL {url!r}: the scheme must be one of {', '.join(sorted(SCHEMES))}://")
    if parts.username is not None or parts.password is not None:
        raise RelayConfigError(
            f"relay URL {url!r} carries credentials; put them in a file and pass --creds FILE (mode 0600)"
        )
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise RelayConfigError(f"relay URL {url!r}: {exc}") from None
    if not host:
        raise RelayConfigError(f"relay URL {url!r} names no host")
    if port is not None and not 0 < port < 65536:
        raise RelayConfigError(f"relay URL {url!r}: port {port} is out of range")
    if not SCHEMES[parts.scheme] and not is_loopback_host(host):
        raise RelayConfigError(
            f"relay URL {url!r} is not on loopback, so it must use TLS: tls://{parts.netloc} (or wss://)"
        )
    return url.strip()


def default_alias(environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    raw = env.get("CROSSTALK_ALIAS") or socket.gethostname().split(".")[0]
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "-", raw)[:64].strip("-")
    return cleaned or "machine"


def check_alias(alias: str) -> str:
    if not ALIAS_RE.fullmatch(alias):
        raise RelayConfigError(
            f"alias {alias!r}: use 1-64 letters, digits, '-' or '_' (it is one NATS subject token and the part "
            "after '@' in NAME@ALIAS)"
        )
    return alias


def read_credentials(path: str | Path) -> Credentials:
    """The credentials in `path`, refusing a file others could read (any group or other bit), one not owned by this
    user, a symlink or a non-regular file. The forms, by content:
    - a NATS credentials file (`-----BEGIN NATS USER JWT-----` … the nkey seed), as `nsc` writes it;
    - an nkey seed alone (a line starting `SU`);
    - `token=SECRET`, or `user=NAME` and `password=SECRET`, one per line (`#` comments allowed)."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        raise RelayConfigError(f"credentials file {path} does not exist") from None
    except NotRegularFile as exc:
        raise RelayConfigError(f"credentials file {path}: {exc}") from None
    except OSError as exc:
        raise RelayConfigError(f"cannot open credentials file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise RelayConfigError(f"credentials file {path} is owned by uid {st.st_uid}, not by you; refusing it")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise RelayConfigError(
                f"credentials file {path} is mode {mode:04o}: others could read it; run chmod 600 {path}"
            )
        raw = read_fd_capped(fd, MAX_CREDS_BYTES)
    finally:
        os.close(fd)
    if raw is None:
        raise RelayConfigError(f"credentials file {path} is over {MAX_CREDS_BYTES} bytes; is it the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RelayConfigError(f"credentials file {path} is not UTF-8 text") from None
    return parse_credentials(text, str(path))


def parse_credentials(text: str, where: str) -> Credentials:
    if "-----BEGIN NATS USER JWT-----" in text:
        return Credentials(creds_file=where)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if len(lines) == 1 and lines[0].startswith("SU") and "=" not in lines[0]:
        return Credentials(nkey_seed=lines[0])
    fields: dict[str, str] = {}
    for ln in lines:
        key, sep, value = ln.partition("=")
        key = key.strip()
        if not sep or key not in ("user", "password", "token"):
            raise RelayConfigError(
                f"credentials file {where}: line {key!r} is not user=, password= or token= (nor a NATS .creds file "
                "or an nkey seed)"
            )
        fields[key] = value.strip()
    if "token" in fields and ("user" in fields or "password" in fields):
        raise RelayConfigError(f"credentials file {where}: give a token or a user and password, not both")
    if fields.get("token"):
        return Credentials(token=fields["token"])
    if fields.get("user"):
        return Credentials(user=fields["user"], password=fields.get("password", ""))
    raise RelayConfigError(f"credentials file {where} holds no credentials")


def save(paths: StatePaths, config: RelayConfig) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    ensure_private_dir(paths.root)
    ensure_private_dir(relay_dir(paths))
    atomic_write(config_path(paths), (json.dumps(config.to_dict(), indent=2) + "\n").encode(), mode=0o600)


def load(paths: StatePaths) -> RelayConfig | None:
    """The saved join, or None when this state root has not joined a relay. RelayConfigError when it is damaged."""
    path = config_path(paths)
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RelayConfigError(f"cannot read {path}: {exc}") from None
    try:
        raw = read_fd_capped(fd, MAX_CONFIG_BYTES)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw or b"")
        url, alias, creds = data["url"], data["alias"], data.get("creds")
        if not isinstance(url, str) or not isinstance(alias, str) or not isinstance(creds, str | None):
            raise TypeError("wrong types")
    except (ValueError, KeyError, TypeError) as exc:
        raise RelayConfigError(f"{path} is damaged ({exc}); run `crosstalk relay leave` and join again") from None
    return RelayConfig(check_url(url), check_alias(alias), creds)


def joined(paths: StatePaths) -> bool:
    """Whether this state root joined a relay: one stat, cheap enough for `crosstalk send`'s path."""
    return os.path.exists(config_path(paths))


def remove(paths: StatePaths) -> bool:
    try:
        os.unlink(config_path(paths))
    except FileNotFoundError:
        return False
    return True


def credentials_of(config: RelayConfig) -> Credentials:
    return read_credentials(config.creds) if config.creds else Credentials()
