"""Bearer tokens of the collection server: random, shown once, stored hashed, compared in
constant time.

A token is 32 bytes from the OS CSPRNG, URL-safe base64 with a short prefix naming its role
(``ll_ingest_…``, ``ll_read_…``, ``ll_enroll_…``). A device credential also names its device:
``ll_device_<device id>.<32 random bytes, URL-safe base64>`` (the id tells the server which
stored hash to compare with; ``.`` never occurs in URL-safe base64). The database keeps only
SHA-256 digests; a presented token is hashed and compared to a stored digest with
:func:`hmac.compare_digest`, so the time taken does not depend on how many leading bytes match.
A 256-bit random secret needs no slow password hash: nobody can guess it, and the digest does
not reveal it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

#: Roles a collection's token can have.
ROLES = ("ingest", "read", "enroll")
DEVICE_PREFIX = "ll_device_"
#: Stands in for a hash that does not exist (unknown collection or device), so that the same
#: comparisons run whatever exists: no stored digest equals it (it is not a SHA-256 output
#: anyone knows a preimage of).
ABSENT = hashlib.sha256(b"longldp/absent-token/v1").digest()


def new_token(role: str) -> str:
    """A fresh random token for ``role`` (one of :data:`ROLES`)."""
    if role not in ROLES:
        raise ValueError(f"server: token 'role' must be one of {ROLES}; got {role!r}.")
    return f"ll_{role}_{secrets.token_urlsafe(32)}"


def new_device_credential(device_id: int) -> str:
    """A fresh credential of device ``device_id``."""
    return f"{DEVICE_PREFIX}{int(device_id)}.{secrets.token_urlsafe(32)}"


def device_of(token: str | None) -> int | None:
    """The device id a credential names, or None if ``token`` is not shaped like one."""
    if token is None or not token.startswith(DEVICE_PREFIX):
        return None
    head, dot, _ = token[len(DEVICE_PREFIX) :].partition(".")
    if not dot or not head.isascii() or not head.isdigit() or len(head) > 18:
        return None
    return int(head)


def digest(token: str) -> bytes:
    """SHA-256 digest of a token (what the database stores)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def matches(token: str | None, stored: bytes | None) -> bool:
    """True iff ``token`` hashes to ``stored``; constant time in the compared bytes."""
    if token is None or stored is None:
        return False
    return hmac.compare_digest(digest(token), bytes(stored))


def matches_digest(presented: bytes, stored: bytes | None) -> bool:
    """:func:`matches` for a digest already computed; an absent hash compares with
    :data:`ABSENT` (and fails) so that both cases do the same work."""
    return hmac.compare_digest(presented, ABSENT if stored is None else bytes(stored)) and (
        stored is not None
    )


def matches_plain(token: str | None, expected: str | None) -> bool:
    """Constant-time comparison of a presented token with a configured one (the admin token)."""
    if token is None or not expected:
        return False
    return hmac.compare_digest(digest(token), digest(expected))
