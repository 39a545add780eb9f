"""Files of the device client: the secret and the state, saved atomically (docs/client.md §2).

The secret file holds 32 bytes from ``os.urandom`` with a magic and a checksum; the state file
holds JSON (memo keys, spent budget, upload queue, server credentials) authenticated by an
HMAC-SHA256 tag whose key is derived from the secret. Both are written to a temporary file in
the same directory, flushed with ``fsync``, then renamed over the old file (and the directory is
synced), so a crash leaves either the old or the new file, never a mixture, and at most one
temporary file, removed when the client opens the state again.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

SECRET_MAGIC = b"LLS1"
SECRET_SIZE = 32
STATE_FORMAT = "longldp.device-state"
STATE_VERSION = 1


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data``: temp file, fsync, rename, fsync of the directory.

    The temporary file has one fixed name per destination (``.<name>.tmp``), so a process
    killed mid-write leaves at most that one file, which the next write replaces (a state has
    one writer: the device's client); :func:`remove_stale_temporaries` deletes it on open.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    tmp = folder / f".{path.name}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover (platforms without directory descriptors)
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def remove_stale_temporaries(path: Path) -> int:
    """Delete temporary files a killed writer of ``path`` left behind (this release's fixed
    ``.<name>.tmp`` and the random ``.<name>.<random>.tmp`` of earlier ones); how many."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    stale = [folder / f".{path.name}.tmp", *folder.glob(f".{glob.escape(path.name)}.*.tmp")]
    removed = 0
    for tmp in stale:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed += 1
    return removed


# ---------------------------------------------------------------------- secret


def _secret_check(secret: bytes) -> bytes:
    return hashlib.sha256(SECRET_MAGIC + secret).digest()[:4]


def load_or_create_secret(path: Path) -> bytes:
    """The device secret stored at ``path``, created from ``os.urandom`` if the file is absent.

    A file that exists but is not a valid secret raises ``ValueError`` (never replaced).
    """
    path = Path(path)
    remove_stale_temporaries(path)
    if not path.exists():
        secret = os.urandom(SECRET_SIZE)
        write_atomic(path, SECRET_MAGIC + secret + _secret_check(secret))
        return secret
    raw = path.read_bytes()
    secret = raw[len(SECRET_MAGIC) : len(SECRET_MAGIC) + SECRET_SIZE]
    if (
        len(raw) != len(SECRET_MAGIC) + SECRET_SIZE + 4
        or not raw.startswith(SECRET_MAGIC)
        or raw[-4:] != _secret_check(secret)
    ):
        raise ValueError(
            f"device secret {path}: corrupt or not a longldp secret file "
            f"(expected {len(SECRET_MAGIC) + SECRET_SIZE + 4} bytes starting with 'LLS1' and "
            "a valid checksum); refusing to replace it."
        )
    return secret


def derive(secret: bytes, label: bytes) -> bytes:
    """A 32-byte key for one purpose: HMAC-SHA256(secret, label)."""
    return hmac.new(secret, label, hashlib.sha256).digest()


def secret_id(secret: bytes) -> str:
    """A public 8-byte name of the secret (hex), to recognize its state files."""
    return derive(secret, b"longldp/secret-id/v1")[:8].hex()


# ---------------------------------------------------------------------- state


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _tag(secret: bytes, body: dict[str, Any]) -> str:
    return hmac.new(derive(secret, b"longldp/state-mac/v1"), _canonical(body), "sha256").hexdigest()


def save_state(path: Path, secret: bytes, body: dict[str, Any]) -> None:
    """Write ``body`` (JSON) with its format, version and HMAC tag, atomically."""
    full = {"format": STATE_FORMAT, "version": STATE_VERSION, **body}
    full["mac"] = _tag(secret, full)
    write_atomic(path, _canonical(full))


def load_state(path: Path, secret: bytes) -> dict[str, Any]:
    """The JSON body of a state file, after every check (``ValueError`` saying which failed)."""
    raw = Path(path).read_bytes()
    try:
        full = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(
            f"device state {path}: corrupt (not JSON); refusing it. Move the file away to start "
            "a new state (the secret reproduces the same round-1 memos)."
        ) from None
    if not isinstance(full, dict) or full.get("format") != STATE_FORMAT:
        raise ValueError(f"device state {path}: not a longldp device state file.")
    if full.get("version") != STATE_VERSION:
        raise ValueError(
            f"device state {path}: version {full.get('version')!r}; this client reads "
            f"version {STATE_VERSION}."
        )
    if full.get("secret_id") != secret_id(secret):
        raise ValueError(
            f"device state {path}: written under another device secret (secret id "
            f"{full.get('secret_id')!r}, this device's is {secret_id(secret)!r}); refusing it."
        )
    tag = full.pop("mac", None)
    if not isinstance(tag, str) or not hmac.compare_digest(tag, _tag(secret, full)):
        raise ValueError(
            f"device state {path}: its authentication tag does not match: the file is corrupt "
            "or was modified; refusing it."
        )
    return full
