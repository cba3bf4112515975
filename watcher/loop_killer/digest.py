"""Short digests for comparing texts and bytes, without OpenSSL.

``import hashlib`` loads OpenSSL's bindings (3.6 MB resident) whatever algorithm is used;
a watcher that follows thousands of sessions, and every hook process, need not carry
that. BLAKE2 is built into CPython (``_blake2``, the very module ``hashlib.blake2b``
comes from) and is as good for telling texts apart.
"""

from __future__ import annotations

from _blake2 import blake2b

__all__ = ["digest", "hex_digest"]


def digest(data: bytes, size: int = 16) -> bytes:
    """A ``size``-byte digest of ``data``."""
    return blake2b(data, digest_size=size).digest()


def hex_digest(text: str, chars: int) -> str:
    """A digest of ``text`` as ``chars`` hex digits (at most 128)."""
    return blake2b(text.encode("utf-8", "surrogatepass"),
                   digest_size=(chars + 1) // 2).hexdigest()[:chars]
