"""Bearer tokens of the collection server: random, shown once, stored hashed, compared in
constant time.

A token is 32 bytes from the OS CSPRNG, URL-safe base64 with a short prefix naming its role
(``ll_ingest_…``, ``ll_read_…``). The database keeps only its SHA-256 digest; a presented
token is hashed and compared to the stored digest with :func:`hmac.compare_digest`, so the time
taken does not depend on how many leading bytes match. A 256-bit random secret needs no slow
password hash: nobody can guess it, and the digest does not reveal it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

#: Roles a collection's token can have.
ROLES = ("ingest", "read")


def new_token(role: str) -> str:
    """A fresh random token for ``role`` (one of :data:`ROLES`)."""
    if role not in ROLES:
        raise ValueError(f"server: token 'role' must be one of {ROLES}; got {role!r}.")
    return f"ll_{role}_{secrets.token_urlsafe(32)}"


def digest(token: str) -> bytes:
    """SHA-256 digest of a token (what the database stores)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def matches(token: str | None, stored: bytes | None) -> bool:
    """True iff ``token`` hashes to ``stored``; constant time in the compared bytes."""
    if token is None or stored is None:
        return False
    return hmac.compare_digest(digest(token), bytes(stored))


def matches_plain(token: str | None, expected: str | None) -> bool:
    """Constant-time comparison of a presented token with a configured one (the admin token)."""
    if token is None or not expected:
        return False
    return hmac.compare_digest(digest(token), digest(expected))
