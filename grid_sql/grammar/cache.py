"""On-disk store of loaded grammars: skip lark's grammar loader on a warm start (§6.2).

Reading a dialect's ``.lark`` files through lark (parse the grammar of grammars, resolve
``%import``/``%override``/``%extend``, expand ``[x]``/``x*``) costs ~0.3 s of CPU per
dialect and process, most of a cold compile once the LALR(1) tables are built in Rust. The
result — terminals with their regexes and the resolved BNF rules — is small, so it is kept
as a content-addressed JSON entry in the one on-disk store (``grid_sql/store.py``, which
owns the root, the layout and atomic writes):

    $GRID_SQL_CACHE_DIR (default ~/.cache/grid-sql)/grammars/v1/<key[:2]>/<key>.json

The key is a BLAKE2b digest of everything the loader reads: the store format, lark's
version, the grammar text, start symbol, name and explicit categories, and every ``.lark``
file in the import paths and beside the source file. An entry is trusted only after it
proves itself: its format and key must match and the grammar rebuilt from it must hash to
the fingerprint recorded when it was written. Anything else — unreadable, truncated,
tampered with, from another version — is treated as absent: the grammar is loaded by lark
again and the entry rewritten (atomically). ``GRID_SQL_CACHE_DIR=off`` disables the store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store import cache_root, sharded, write_atomic

if TYPE_CHECKING:
    from .ir import Grammar

STORE_FORMAT = 1


@dataclass
class StoreStats:
    """Counters of this process (tests and benchmarks read them)."""

    hits: int = 0
    misses: int = 0
    rejected: int = 0  # entries found corrupt or stale (then rebuilt and rewritten)
    writes: int = 0


STATS = StoreStats()


def store_dir() -> Path | None:
    """Root of the grammar store, or None when disabled (``GRID_SQL_CACHE_DIR=off``)."""
    base = cache_root()
    return None if base is None else base / "grammars" / f"v{STORE_FORMAT}"


def _lark_version() -> str:
    import lark

    return str(getattr(lark, "__version__", "?"))


def source_key(
    text: str,
    start: str,
    *,
    import_paths: Sequence[str | Path],
    source_path: str | Path | None,
    categories: Iterable[str],
    name: str,
) -> str:
    """Digest of every input of lark's loader for this grammar (see the module docs)."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-gstore")
    head = {
        "format": STORE_FORMAT,
        "lark": _lark_version(),
        "start": start,
        "name": name,
        "categories": sorted(categories),
        "source": str(source_path) if source_path else None,
    }
    h.update(json.dumps(head, sort_keys=True).encode() + b"\0")
    h.update(text.encode() + b"\0")
    dirs = [Path(p) for p in import_paths]
    if source_path:
        dirs.append(Path(source_path).parent)
    seen: set[Path] = set()
    for d in dirs:
        try:
            rd = d.resolve()
        except OSError:
            continue
        if rd in seen or not rd.is_dir():
            continue
        seen.add(rd)
        for f in sorted(rd.glob("*.lark")):
            h.update(str(f.name).encode() + b"\0")
            try:
                h.update(f.read_bytes())
            except OSError:
                h.update(b"<unreadable>")
            h.update(b"\0")
    return h.hexdigest()


def entry_path(root: Path, key: str) -> Path:
    return sharded(root, key, ".json")


def encode(grammar: Grammar, key: str) -> str:
    """The entry text of ``grammar`` (as loaded, before any projection or lexicon)."""
    doc = {
        "format": STORE_FORMAT,
        "key": key,
        "fingerprint": grammar.fingerprint,
        "name": grammar.name,
        "start": grammar.start,
        "terminals": [
            [t.name, t.pattern, t.priority, t.is_string, t.ignored, t.category]
            for t in grammar.terminals
        ],
        "rules": [[r.lhs, list(r.rhs)] for r in grammar.rules],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def decode(raw: str, key: str, build: Callable[[dict[str, Any]], Grammar]) -> Grammar:
    """Rebuild the grammar of an entry with ``build`` (the IR's constructor from a stored
    document, ``Grammar.from_store``; passed in so that this store does not import the IR
    it stores); ValueError unless it is exactly what was stored."""
    try:
        doc = json.loads(raw)
        if doc["format"] != STORE_FORMAT or doc["key"] != key:
            raise ValueError("format or key mismatch")
        g = build(doc)
    except ValueError:
        raise
    except Exception as exc:  # malformed JSON structure of any kind
        raise ValueError(f"malformed entry: {type(exc).__name__}: {exc}") from exc
    if g.fingerprint != doc["fingerprint"]:
        raise ValueError("the rebuilt grammar does not hash to the stored fingerprint")
    return g


def load(key: str, build: Callable[[dict[str, Any]], Grammar]) -> Grammar | None:
    """The stored grammar for ``key`` (rebuilt by ``build``, see :func:`decode`); None if
    absent, disabled, corrupt or stale."""
    root = store_dir()
    if root is None:
        return None
    p = entry_path(root, key)
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        STATS.misses += 1
        return None
    except (OSError, UnicodeDecodeError):
        STATS.rejected += 1
        return None
    try:
        g = decode(raw, key, build)
    except ValueError:
        STATS.rejected += 1
        return None
    STATS.hits += 1
    return g


def save(grammar: Grammar, key: str) -> None:
    """Write the entry atomically; a read-only or full disk only costs the next start."""
    root = store_dir()
    if root is None:
        return
    if write_atomic(entry_path(root, key), encode(grammar, key).encode()):
        STATS.writes += 1


def describe() -> dict[str, Any]:
    """Where the store is and this process's counters."""
    root = store_dir()
    return {"dir": str(root) if root else None, **STATS.__dict__}
