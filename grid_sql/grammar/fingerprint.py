"""Deterministic content fingerprints for grammar artifacts.

Every artifact (grammar, projection, lexicon, tables) is addressed by a BLAKE2b digest of a
canonical encoding, so the same input gives the same fingerprint on every machine and a
cache or an audit record can name an artifact without embedding it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _canonical(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return {"$b": obj.hex()}
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        items = [_canonical(v) for v in obj]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise TypeError(f"cannot fingerprint {type(obj).__name__}")


def canonical_bytes(obj: Any) -> bytes:
    """The canonical byte encoding of a JSON-like value (sorted keys, bytes as hex)."""
    return json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":")).encode()


def fingerprint(kind: str, obj: Any) -> str:
    """Hex BLAKE2b-256 of ``kind`` and the canonical encoding of ``obj``."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-fp")
    h.update(kind.encode() + b"\0")
    h.update(canonical_bytes(obj))
    return h.hexdigest()
