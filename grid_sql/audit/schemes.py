"""Entry-id schemes: how a mask-cache entry's content address was hashed when a record was sealed.

A record's steps name the mask-cache entries each mask was built from (``entry_ids``), and
replay recomputes them. When the engine changes how an entry id is hashed, a genuine old
record stops replaying to the same ids: without knowing the scheme, a verifier can only call
that divergence — indistinguishable from tampering. So every seal names its scheme
(``entry_scheme``) and its engine, and the verifier replays a record under the scheme it
was sealed with, or says plainly that it cannot.

Schemes (``MaskEntry.make`` in ``grid_sql/mask/cache.py``):

1. CI ids always hashed as a little-endian int32 list (``ids-i32le/v1``): every seal before
   commit 7c326f3.
2. CI ids hashed by ``ids_payload``: the list, or the bitmap (``ids-bitmap/v1``) when that
   is shorter (7c326f3 onwards). Only dense entries (identifier positions on a large
   vocabulary) differ from scheme 1.

Seals written before seals named a scheme (no ``entry_scheme``) are scheme 1 or 2; the
verifier infers which from the ids themselves, and says that it inferred it.

Whoever changes entry hashing bumps :data:`ENTRY_SCHEME` and teaches
:func:`entry_id_under` the old one: ``tests/audit/test_schemes.py`` pins the current hash.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from ..mask.cache import MaskEntry, ids_payload

ENTRY_SCHEME = 2
REPLAYABLE = (1, 2)
SCHEME_NAMES = {
    1: "int32 id lists (before 7c326f3)",
    2: "id list or bitmap, whichever is shorter (7c326f3 onwards)",
}


def engine_name() -> str:
    """What the seal names as its engine: the package and version that computed the masks."""
    from .. import __version__

    return f"grid-sql {__version__}"


def entry_id_under(scheme: int, entry: MaskEntry) -> str:
    """``entry``'s id as scheme ``scheme`` hashes it (same key, CI ids and residue)."""
    if scheme not in REPLAYABLE:
        raise ValueError(f"entry-id scheme {scheme} is not known to this version")
    h = hashlib.blake2b(digest_size=16, person=b"grid-sql-entry")
    h.update(entry.key.encode())
    ids = np.ascontiguousarray(entry.ci_ids, dtype="<i4")
    if scheme == 1:
        h.update(b"ids-i32le/v1")
        h.update(struct.pack("<I", ids.size))
        h.update(ids.tobytes())
    else:
        h.update(ids_payload(ids))
    h.update(struct.pack("<I", len(entry.residue)))
    for node, term, requeue in entry.residue:
        h.update(struct.pack("<iiI", node, term, len(requeue)))
        h.update(requeue)
    return h.hexdigest()
