"""The one on-disk store: content-addressed entries under one root, written atomically.

Everything grid-sql keeps between processes goes through here, so there is one answer to
"where is it, how is it written, when is it trusted": loaded grammars (``grammar/cache.py``),
lexer automata (``grammar/lexer.py``), token tries (``mask/trie.py``) and the serving
registry's role-grammar artifacts (``serve/registry.py``, which archives them the way the audit
trail does). Each kind keeps its own entry format and its own validation (a grammar must
rebuild to its fingerprint, an automaton must match its kernels' version...); this module owns
what they share, so that a new kind cannot get atomicity or integrity subtly wrong:

    $GRID_SQL_CACHE_DIR (default ~/.cache/grid-sql)/<kind>/v<format>/<key[:2]>/<key><suffix>

An entry is written to a temporary file in its directory and renamed (a reader sees the old
entry, the new one, or none — never half of one); binary entries are framed with a magic, a
JSON head and length-prefixed parts under a BLAKE2b digest, so truncation and tampering read
as "absent" and the caller rebuilds. ``GRID_SQL_CACHE_DIR=off`` disables the store.

The store sits at the bottom of the layers (beside ``errors``): it knows bytes and paths, not
grammars or tokenizers.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ENV = "GRID_SQL_CACHE_DIR"


def cache_root() -> Path | None:
    """``$GRID_SQL_CACHE_DIR`` or ``~/.cache/grid-sql``; None when disabled (``off``)."""
    env = os.environ.get(ENV)
    if env is not None and env.strip().lower() in ("", "0", "off", "none"):
        return None
    return Path(env).expanduser() if env else Path.home() / ".cache" / "grid-sql"


def entry_path(kind: str, version: int, key: str, suffix: str) -> Path | None:
    """Where the store keeps entry ``key`` of ``kind`` (format ``version``), or None when the
    store is disabled: ``<root>/<kind>/v<version>/<key[:2]>/<key><suffix>`` (the two-letter
    fan-out keeps directories small with thousands of roles or vocabularies)."""
    root = cache_root()
    return None if root is None else sharded(root / kind / f"v{version}", key, suffix)


def sharded(base: Path, key: str, suffix: str) -> Path:
    """``base/<key[:2]>/<key><suffix>``: the store's layout under any base directory (the
    serving registry keeps its artifacts under a directory the operator chooses)."""
    return base / key[:2] / f"{key}{suffix}"


def write_atomic(p: Path, data: bytes) -> bool:
    """Write ``data`` to ``p`` via a temporary file and rename; False if the disk refuses."""
    tmp: str | None = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def parts_digest(parts: Sequence[bytes], person: bytes) -> str:
    """BLAKE2b-256 over length-prefixed ``parts`` (``person`` separates the entry kinds)."""
    h = hashlib.blake2b(digest_size=32, person=person)
    for part in parts:
        h.update(struct.pack("<Q", len(part)))
        h.update(part)
    return h.hexdigest()


def write_framed(
    p: Path, magic: bytes, head: dict[str, Any], parts: Sequence[bytes], person: bytes
) -> bool:
    """Write a binary store entry: ``magic``, a JSON head (with the parts' lengths and
    digest added), then the parts; atomically (see :func:`write_atomic`)."""
    full = dict(head, lengths=[len(x) for x in parts], digest=parts_digest(parts, person))
    blob = json.dumps(full, sort_keys=True).encode()
    return write_atomic(p, magic + struct.pack("<I", len(blob)) + blob + b"".join(parts))


def read_framed(
    p: Path, magic: bytes, n_parts: int, person: bytes
) -> tuple[dict[str, Any], list[bytes]] | None:
    """The (head, parts) of an entry written by :func:`write_framed`, or None when it is
    absent, unreadable, truncated, of another kind or fails its digest. The caller still
    checks the head's own fields (format, key, layout) and the parts' shapes."""
    try:
        data = p.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(magic):
            return None
        off = len(magic)
        (n_head,) = struct.unpack_from("<I", data, off)
        off += 4
        head = json.loads(data[off : off + n_head])
        off += n_head
        lengths = [int(x) for x in head["lengths"]]
        if len(lengths) != n_parts or min(lengths, default=0) < 0:
            return None
        if len(data) != off + sum(lengths):
            return None
        parts: list[bytes] = []
        for n in lengths:
            parts.append(data[off : off + n])
            off += n
        if parts_digest(parts, person) != head["digest"]:
            return None
        return head, parts
    except (ValueError, KeyError, TypeError, struct.error):
        return None
