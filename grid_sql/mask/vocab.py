"""Vocabularies as byte strings: the canonical token spelling ``bytes: V -> Σ*`` (paper §2).

The grammar, the scanner and the trie walk all work on *bytes*, while tokenizers store their
tokens in model-specific text encodings. This module is the one place where those encodings
are undone, so that the trie build, the mask fast path and the reference oracle all agree on
what every token id spells (paper §2, "Tokens are byte strings").

Spelling rules (one per vocabulary family):

* **byte-level BPE** (GPT-2, Llama-3, Qwen2, StarCoder, DeepSeek): every character of a token
  is the GPT-2 ``bytes_to_unicode`` image of one byte (``Ġ`` -> 0x20, ``Ċ`` -> 0x0A, ...); the
  map is inverted. A token containing a character outside the map is spelled as its literal
  UTF-8 text (this is what the Hugging Face ``ByteLevel`` decoder does).
* **SentencePiece** (Llama-2, Phi-3, Gemma, Unigram models): ``▁`` (U+2581, or the Metaspace
  replacement character) -> 0x20; byte-fallback tokens ``<0xNN>`` -> the single byte 0xNN;
  everything else is the token's UTF-8 text. The "add a leading space to the first word"
  convention is a property of *encoding a sequence*, not of any token, so it is not part
  of a spelling (see :data:`SPM_LEADING_SPACE_RULE`).
* **bytes** (tiktoken-style vocabularies): the tokens already are byte strings.
* **user-defined / non-special added tokens**: their literal text as UTF-8 (llama.cpp's
  ``token_to_piece`` convention).
* **control / unknown / unused / special added tokens**: *special* — excluded from the token
  trie and permanently masked. EOS is always special: it enters masks only through the
  grammar's EOS gate (paper Definition 4). Their ``token_bytes`` entry is their literal text,
  kept for display only.

Distinct ids with the same spelling (alias classes, e.g. SentencePiece's ``▁`` and
``<0x20>``) are all kept: masks are over ids, not spellings.

Byte completeness (precondition (a) of the paper's Proposition 8) is checked here; see
:attr:`Vocabulary.byte_complete`.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import struct
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np

# grid_sql/errors.py (owned by the errors engineer) already defines TokenizerError in the one
# exception hierarchy, so it is re-used rather than shadowed by a second class of that name.
from grid_sql.errors import TokenizerError

__all__ = [
    "GGUFFormatError",
    "SPM_LEADING_SPACE_RULE",
    "SpellingScheme",
    "TokenizerError",
    "UnsupportedTokenizerError",
    "Vocabulary",
    "VocabularyIncompleteWarning",
    "VocabularyWarning",
    "byte_level_decode",
    "gpt2_bytes_to_unicode",
    "read_gguf_metadata",
]


class GGUFFormatError(TokenizerError):
    """A GGUF file is truncated, has a bad magic/version, or lacks the tokenizer metadata."""


class UnsupportedTokenizerError(TokenizerError):
    """The tokenizer family has no byte-exact spelling rule here (e.g. WordPiece, RWKV)."""


class VocabularyWarning(UserWarning):
    """Something about a vocabulary weakens a guarantee without making it unusable."""


class VocabularyIncompleteWarning(VocabularyWarning):
    """Some byte value has no single-byte non-special token: completeness is void.

    Soundness is unaffected (masks never admit a token whose bytes leave the language), but
    Proposition 8 (completeness / dead-end freedom) no longer holds: a viable prefix whose
    only continuations start with a missing byte may have no legal token.
    """


SpellingScheme = Literal["byte-level", "sentencepiece", "bytes", "literal"]

SPM_LEADING_SPACE_RULE: Final[str] = (
    "SentencePiece models with add_space_prefix (llama.cpp's default for the 'llama' "
    "tokenizer model, i.e. Llama-2 and Phi-3) encode a non-empty text t as if it were ' ' + t; "
    "the concatenated token spellings therefore equal b' ' + t.encode(). Gemma-4 sets "
    "tokenizer.ggml.add_space_prefix = false and spells t exactly. Token spellings "
    "themselves never include or strip this space."
)

# GGUF token types (llama.cpp's llama_token_type).
_TT_NORMAL: Final = 1
_TT_UNKNOWN: Final = 2
_TT_CONTROL: Final = 3
_TT_USER_DEFINED: Final = 4
_TT_UNUSED: Final = 5
_TT_BYTE: Final = 6

_SPM_SPACE: Final[bytes] = "\u2581".encode()  # ▁
_BYTE_TOKEN_RE: Final = re.compile(rb"<0x([0-9A-Fa-f]{2})>")

# Bytes that never occur in well-formed UTF-8 (overlong leads and leads beyond U+10FFFF).
_NON_UTF8_BYTES: Final[frozenset[int]] = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])


# --------------------------------------------------------------------------- byte-level BPE


def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-character map (``bytes_to_unicode``).

    Printable Latin-1 bytes map to themselves; the other 68 bytes map to U+0100.. in byte
    order, which is why a space is spelled ``Ġ`` (U+0120) and a newline ``Ċ`` (U+010A).
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    mapping = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(0x100 + n)
            n += 1
    return mapping


def _byte_level_table() -> dict[int, int]:
    """``str.translate`` table: mapped char -> the char whose code point is its byte.

    Characters below U+0100 that are *not* images of the map are sent to U+FFFF so that the
    following ``encode('latin-1')`` fails on them instead of silently passing them through.
    """
    table: dict[int, int] = {ord(c): b for b, c in gpt2_bytes_to_unicode().items()}
    for cp in range(0x100):
        table.setdefault(cp, 0xFFFF)
    return table


_BYTE_LEVEL_TABLE: Final[dict[int, int]] = _byte_level_table()


def byte_level_decode(text: str) -> bytes | None:
    """Invert the GPT-2 byte->unicode remap; ``None`` if a character is outside the map."""
    try:
        return text.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        return None


def _spell_byte_level(raw: bytes) -> bytes:
    """Spell one byte-level BPE token given its stored UTF-8 text (HF ByteLevel decoder rule)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
    out = byte_level_decode(text)
    return raw if out is None else out


def _spell_spm(raw: bytes, space: bytes = _SPM_SPACE) -> bytes:
    """Spell one SentencePiece piece: the space marker becomes 0x20.

    Replacing the marker's UTF-8 encoding inside the UTF-8 bytes is exact because UTF-8 is
    self-synchronising: the sequence can only occur as an encoding of the marker itself.
    """
    return raw.replace(space, b" ") if space in raw else raw


def _parse_byte_token(raw: bytes) -> int | None:
    """The byte value of a ``<0xNN>`` byte-fallback token, or ``None``."""
    m = _BYTE_TOKEN_RE.fullmatch(raw)
    return int(m.group(1), 16) if m else None


def _caller_stacklevel() -> int:
    """``warnings.warn`` stacklevel of the first frame outside this module.

    Constructors reach ``__init__`` through different depths; the warning should point at
    the caller's line, not at an adapter here.
    """
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


# --------------------------------------------------------------------------- the vocabulary


class Vocabulary:
    """An immutable tokenizer vocabulary: the canonical byte spelling of every token id.

    Attributes:
        token_bytes: ``token_bytes[i]`` is the spelling of id ``i`` (for special ids: their
            literal text, for display only).
        eos_token_id: the end-of-sequence id; always a member of ``special_ids``.
        special_ids: ids excluded from the trie and permanently masked.
        size: number of ids (the logits dimension the masks are built for).
        fingerprint: hex BLAKE2b-256 of a canonical encoding of (size, every spelling, eos,
            sorted specials); tries and mask caches are keyed by it.
        byte_complete: every byte value 0..255 is the whole spelling of some non-special
            token (see :meth:`_check_completeness` for why this is the criterion).
        missing_bytes: the byte values that have no such token, ascending.
        scheme: which spelling rule produced the vocabulary (not part of the fingerprint:
            two vocabularies that spell every id identically are interchangeable).
        source: a human-readable origin (file path, adapter), also not fingerprinted.
    """

    __slots__ = (
        "_token_bytes",
        "_eos_token_id",
        "_special_ids",
        "_fingerprint",
        "_missing_bytes",
        "_scheme",
        "_source",
    )

    _token_bytes: tuple[bytes, ...]
    _eos_token_id: int
    _special_ids: frozenset[int]
    _fingerprint: str
    _missing_bytes: tuple[int, ...]
    _scheme: SpellingScheme
    _source: str

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        *,
        eos_token_id: int,
        special_ids: Iterable[int] = (),
        scheme: SpellingScheme = "bytes",
        source: str = "",
        warn_incomplete: bool = True,
    ) -> None:
        tb = tuple(token_bytes)
        size = len(tb)
        if size == 0:
            raise TokenizerError("a vocabulary needs at least one token")
        for i, t in enumerate(tb):
            if not isinstance(t, bytes):
                raise TokenizerError(
                    f"token {i} spelling must be bytes, got {type(t).__name__}: {t!r}"
                )
        eos = int(eos_token_id)
        if not 0 <= eos < size:
            raise TokenizerError(f"eos_token_id {eos} is outside the vocabulary (size {size})")
        specials = set()
        for s in special_ids:
            s = int(s)
            if not 0 <= s < size:
                raise TokenizerError(f"special id {s} is outside the vocabulary (size {size})")
            specials.add(s)
        specials.add(eos)  # EOS is special: it enters masks only through the EOS gate.
        set_ = object.__setattr__
        set_(self, "_token_bytes", tb)
        set_(self, "_eos_token_id", eos)
        set_(self, "_special_ids", frozenset(specials))
        set_(self, "_scheme", scheme)
        set_(self, "_source", source)
        set_(self, "_fingerprint", self._compute_fingerprint())
        set_(self, "_missing_bytes", self._check_completeness())
        if warn_incomplete and self._missing_bytes:
            missing = self._missing_bytes
            shown = ", ".join(f"0x{b:02X}" for b in missing[:16])
            more = f" (+{len(missing) - 16} more)" if len(missing) > 16 else ""
            utf8_note = (
                " All of them are bytes that never occur in well-formed UTF-8, so "
                "completeness still holds for UTF-8 languages."
                if set(missing) <= _NON_UTF8_BYTES
                else ""
            )
            warnings.warn(
                f"vocabulary {source or '<unnamed>'} is not byte-complete: no non-special "
                f"token spells the single byte(s) {shown}{more}. Completeness (Prop. 8) "
                f"is void for languages that need them; soundness is not affected.{utf8_note}",
                VocabularyIncompleteWarning,
                stacklevel=_caller_stacklevel(),
            )

    # -- immutability ------------------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Vocabulary is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Vocabulary is immutable")

    def __getstate__(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state: dict[str, object]) -> None:
        # Unpickling restores the checked state as is (no re-validation, no second warning).
        for name, value in state.items():
            object.__setattr__(self, name, value)

    # -- accessors ---------------------------------------------------------------------

    @property
    def token_bytes(self) -> tuple[bytes, ...]:
        return self._token_bytes

    @property
    def eos_token_id(self) -> int:
        return self._eos_token_id

    @property
    def special_ids(self) -> frozenset[int]:
        return self._special_ids

    @property
    def size(self) -> int:
        return len(self._token_bytes)

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def scheme(self) -> SpellingScheme:
        return self._scheme

    @property
    def source(self) -> str:
        return self._source

    @property
    def missing_bytes(self) -> tuple[int, ...]:
        return self._missing_bytes

    @property
    def byte_complete(self) -> bool:
        return not self._missing_bytes

    @property
    def utf8_byte_complete(self) -> bool:
        """Complete for every byte that can occur in well-formed UTF-8 (all but C0, C1, F5-FF).

        Why: some vocabularies (DeepSeek-Coder) drop exactly the bytes UTF-8 never uses;
        for SQL over UTF-8 text that loses nothing, and callers may want to say so.
        """
        return set(self._missing_bytes) <= _NON_UTF8_BYTES

    @property
    def empty_ids(self) -> tuple[int, ...]:
        """Non-special ids whose spelling is empty.

        They are excluded from the token trie (emitting one would not advance the output,
        so a mask admitting it could loop forever) and therefore never appear in a mask.
        """
        sp = self._special_ids
        return tuple(i for i, t in enumerate(self._token_bytes) if not t and i not in sp)

    def __len__(self) -> int:
        return len(self._token_bytes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self._fingerprint == other._fingerprint

    def __hash__(self) -> int:
        return hash(self._fingerprint)

    def __repr__(self) -> str:
        return (
            f"Vocabulary(size={self.size}, scheme={self._scheme!r}, eos={self._eos_token_id}, "
            f"specials={len(self._special_ids)}, byte_complete={self.byte_complete}, "
            f"fingerprint={self._fingerprint[:16]}…, source={self._source!r})"
        )

    def spell(self, ids: Iterable[int]) -> bytes:
        """Concatenate the spellings of ``ids`` (what a decoder emitting them outputs)."""
        tb = self._token_bytes
        return b"".join(tb[i] for i in ids)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_ids

    # -- derived facts -----------------------------------------------------------------

    def _compute_fingerprint(self) -> str:
        """Hex BLAKE2b-256 of the canonical encoding.

        Encoding: a domain tag, u64 size, u32 length of every spelling, the concatenated
        spellings, u64 eos, u64 number of specials, the sorted special ids as u64. All
        little-endian. Lengths-then-blob makes the encoding injective.
        """
        tb = self._token_bytes
        h = hashlib.blake2b(digest_size=32)
        h.update(b"grid-sql/vocabulary/v1\x00")
        h.update(struct.pack("<Q", len(tb)))
        h.update(np.fromiter(map(len, tb), dtype="<u4", count=len(tb)).tobytes())
        h.update(b"".join(tb))
        h.update(struct.pack("<Q", self._eos_token_id))
        h.update(struct.pack("<Q", len(self._special_ids)))
        h.update(np.array(sorted(self._special_ids), dtype="<u8").tobytes())
        return h.hexdigest()

    def _check_completeness(self) -> tuple[int, ...]:
        """Byte values with no non-special token spelled as exactly that one byte.

        Criterion: byte ``b`` is *reachable* iff some non-special id has spelling
        ``bytes([b])``. If all 256 are reachable, every byte string is the concatenation of
        non-special spellings (spell it byte by byte), so whatever the next byte of a
        continuation toward the language is, some token extends the viable prefix by exactly
        that byte: this is the precondition (a) that Proposition 8 needs, independent of the
        grammar. It is sufficient, not necessary (a language might only ever need byte
        ``b`` as part of a longer token), which is why a failure voids the *guarantee* and
        warns rather than refusing the vocabulary.
        """
        sp = self._special_ids
        have = bytearray(256)
        for i in [i for i, t in enumerate(self._token_bytes) if len(t) == 1]:
            if i not in sp:
                have[self._token_bytes[i][0]] = 1
        return tuple(b for b in range(256) if not have[b])

    # -- constructors ------------------------------------------------------------------

    @classmethod
    def from_token_bytes(
        cls,
        token_bytes: Sequence[bytes],
        *,
        eos_token_id: int,
        special_ids: Iterable[int] = (),
        source: str = "token_bytes",
        warn_incomplete: bool = True,
    ) -> Vocabulary:
        """A vocabulary whose tokens already are byte strings (tiktoken style, or tests)."""
        return cls(
            token_bytes,
            eos_token_id=eos_token_id,
            special_ids=special_ids,
            scheme="bytes",
            source=source,
            warn_incomplete=warn_incomplete,
        )

    @classmethod
    def from_tiktoken_file(
        cls,
        path: str | os.PathLike[str],
        *,
        special_tokens: Mapping[str, int],
        eos_token: str,
        warn_incomplete: bool = True,
    ) -> Vocabulary:
        """A tiktoken ``.tiktoken`` ranks file (``base64(token) rank`` per line).

        tiktoken keeps its special tokens outside the ranks file, so they are passed in;
        ids not covered by either (gaps) become special with an empty spelling.
        """
        import base64

        ranks: dict[int, bytes] = {}
        with open(path, "rb") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    tok_b64, rank = line.split()
                    ranks[int(rank)] = base64.b64decode(tok_b64, validate=True)
                except ValueError as e:
                    raise TokenizerError(f"{path}:{lineno}: not a tiktoken ranks line") from e
        if eos_token not in special_tokens:
            raise TokenizerError(f"eos token {eos_token!r} is not among the special tokens")
        size = max([*ranks, *special_tokens.values()]) + 1
        tb = [b""] * size
        specials: set[int] = set()
        for i in range(size):
            if i in ranks:
                tb[i] = ranks[i]
            else:
                specials.add(i)
        for text, i in special_tokens.items():
            tb[i] = text.encode()
            specials.add(i)
        return cls(
            tb,
            eos_token_id=special_tokens[eos_token],
            special_ids=specials,
            scheme="bytes",
            source=str(path),
            warn_incomplete=warn_incomplete,
        )

    @classmethod
    def from_gguf(
        cls,
        path: str | os.PathLike[str],
        *,
        eos_token_id: int | None = None,
        warn_incomplete: bool = True,
    ) -> Vocabulary:
        """Load the vocabulary from a GGUF file's ``tokenizer.ggml.*`` metadata.

        Works for vocab-only files and full model files alike: only the key/value header is
        parsed (through ``mmap``), tensor data is never touched. A small reader is used
        instead of ``gguf.GGUFReader`` because the latter materialises every array element
        as its own numpy view (53 s for the 262k-token Gemma vocab here, vs ~0.5 s) and
        because ``gguf`` is only a dev dependency.

        ``eos_token_id`` overrides ``tokenizer.ggml.eos_token_id`` (e.g. a chat model whose
        turn ends with an end-of-turn token); the file's EOS stays special either way.
        """
        meta = read_gguf_metadata(path, prefix="tokenizer.ggml.", skip={"tokenizer.ggml.merges"})
        try:
            model = _as_str(meta["tokenizer.ggml.model"])
            tokens: list[bytes] = meta["tokenizer.ggml.tokens"]
        except KeyError as e:
            raise GGUFFormatError(f"{path}: no {e.args[0]} in the GGUF metadata") from None
        n = len(tokens)
        types = meta.get("tokenizer.ggml.token_type")
        if types is None:
            types_arr = np.full(n, _TT_NORMAL, dtype=np.int32)
        else:
            types_arr = np.asarray(types, dtype=np.int64)
            if types_arr.shape != (n,):
                raise GGUFFormatError(f"{path}: {len(types_arr)} token types for {n} tokens")
        file_eos = meta.get("tokenizer.ggml.eos_token_id", meta.get("tokenizer.ggml.eot_token_id"))
        eos = file_eos if eos_token_id is None else eos_token_id
        if eos is None:
            raise GGUFFormatError(f"{path}: no tokenizer.ggml.eos_token_id in the metadata")

        scheme: SpellingScheme
        if model == "gpt2":
            scheme = "byte-level"
        elif model in ("llama", "t5", "gemma4"):
            # llama = SentencePiece BPE, t5 = SentencePiece Unigram, gemma4 = Gemma-4's
            # SentencePiece-style BPE: all spell spaces with ▁ and have <0xNN> byte tokens.
            scheme = "sentencepiece"
        else:
            raise UnsupportedTokenizerError(
                f"{path}: tokenizer model {model!r} has no byte-exact spelling rule here "
                "(supported: gpt2, llama, t5, gemma4)"
            )

        # Normal tokens are the bulk (and the hot loop); the other types are rare.
        if scheme == "byte-level":
            tb = [_spell_byte_level(raw) for raw in tokens]
        else:
            sp = _SPM_SPACE
            tb = [raw.replace(sp, b" ") if sp in raw else raw for raw in tokens]
        specials: list[int] = []
        for i in np.flatnonzero(types_arr != _TT_NORMAL).tolist():
            tt = int(types_arr[i])
            raw = tokens[i]
            if tt == _TT_USER_DEFINED:
                tb[i] = raw
            elif tt == _TT_BYTE:
                b = _parse_byte_token(raw)
                if b is None:
                    raise GGUFFormatError(f"{path}: byte token {i} is {raw!r}, not <0xNN>")
                tb[i] = bytes([b])
            else:  # control, unknown, unused, undefined: never emitted as text
                tb[i] = raw
                specials.append(i)
        if file_eos is not None and 0 <= int(file_eos) < n:
            specials.append(int(file_eos))
        return cls(
            tb,
            eos_token_id=int(eos),
            special_ids=specials,
            scheme=scheme,
            source=f"{path} (gguf:{model})",
            warn_incomplete=warn_incomplete,
        )

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | os.PathLike[str],
        *,
        eos_token_id: int | str | None = None,
        vocab_size: int | None = None,
        warn_incomplete: bool = True,
    ) -> Vocabulary:
        """Load a Hugging Face ``tokenizer.json`` (read as JSON; no library needed).

        ``eos_token_id`` may be an id or a token's text; if omitted, ``eos_token`` from a
        ``tokenizer_config.json`` next to the file is used. ``vocab_size`` pads the
        vocabulary with special (never emitted) ids up to the model's logits dimension,
        which is often larger than the tokenizer's (Qwen2: 151,936 vs 151,665).
        """
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise TokenizerError(f"{p}: cannot read tokenizer.json: {e}") from e
        if eos_token_id is None:
            eos_token_id = _eos_from_tokenizer_config(p.parent / "tokenizer_config.json")
        return _from_hf_json(
            data,
            eos_token=eos_token_id,
            vocab_size=vocab_size,
            extra_special=(),
            source=str(p),
            warn_incomplete=warn_incomplete,
        )

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        *,
        eos_token_id: int | str | None = None,
        vocab_size: int | None = None,
        warn_incomplete: bool = True,
    ) -> Vocabulary:
        """Adapt a ``tokenizers.Tokenizer`` or a fast ``transformers`` tokenizer.

        Neither library is imported here: the object is duck-typed (``to_str()`` for a
        ``tokenizers.Tokenizer``, ``backend_tokenizer`` for a transformers fast tokenizer),
        so ``import grid_sql`` never pulls in transformers. For a transformers tokenizer the
        EOS defaults to ``tokenizer.eos_token_id`` and ``all_special_ids`` are special.
        """
        extra_special: list[int] = []
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:  # transformers PreTrainedTokenizerFast
            if eos_token_id is None:
                eos_token_id = getattr(tokenizer, "eos_token_id", None)
            extra_special = [int(i) for i in getattr(tokenizer, "all_special_ids", ()) or ()]
            source = f"transformers:{type(tokenizer).__name__}"
        elif callable(getattr(tokenizer, "to_str", None)):  # tokenizers.Tokenizer
            backend = tokenizer
            source = "tokenizers.Tokenizer"
        else:
            raise UnsupportedTokenizerError(
                f"cannot adapt {type(tokenizer).__name__}: expected a tokenizers.Tokenizer or "
                "a transformers fast tokenizer (slow/SentencePiece-only tokenizers: convert "
                "to a fast tokenizer or load the model's GGUF/tokenizer.json instead)"
            )
        try:
            data = json.loads(backend.to_str())
        except (TypeError, ValueError) as e:
            raise TokenizerError(f"cannot serialise {source} to JSON: {e}") from e
        return _from_hf_json(
            data,
            eos_token=eos_token_id,
            vocab_size=vocab_size,
            extra_special=extra_special,
            source=source,
            warn_incomplete=warn_incomplete,
        )


# --------------------------------------------------------------------------- HF tokenizer.json


def _as_str(v: Any) -> str:
    return bytes(v).decode("utf-8") if isinstance(v, bytes | bytearray | memoryview) else str(v)


def _eos_from_tokenizer_config(path: Path) -> str | None:
    """``eos_token`` from a tokenizer_config.json (a string or an AddedToken dict)."""
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    eos = cfg.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    return eos if isinstance(eos, str) else None


def _walk_components(node: Any) -> list[dict[str, Any]]:
    """Flatten a normalizer/pre-tokenizer/decoder tree (``Sequence`` nests components)."""
    if not isinstance(node, dict):
        return []
    out = [node]
    for key in ("decoders", "pretokenizers", "normalizers"):
        for child in node.get(key) or ():
            out.extend(_walk_components(child))
    return out


def _detect_hf_scheme(data: Mapping[str, Any]) -> tuple[SpellingScheme, str]:
    """Which spelling rule a tokenizer.json implies, and its SentencePiece space marker.

    The decoder is authoritative (it is what turns ids back into text); the pre-tokenizer
    and normalizer are consulted only if there is no decoder.
    """
    for part in ("decoder", "pre_tokenizer", "normalizer"):
        for comp in _walk_components(data.get(part)):
            kind = comp.get("type")
            if kind == "ByteLevel":
                return "byte-level", "\u2581"
            if kind == "Metaspace":
                return "sentencepiece", str(comp.get("replacement") or "\u2581")
            if kind == "Replace":
                pattern = comp.get("pattern") or {}
                src = pattern.get("String") if isinstance(pattern, dict) else None
                dst = comp.get("content")
                if part == "decoder" and isinstance(src, str) and dst == " " and src:
                    return "sentencepiece", src
                if part == "normalizer" and src == " " and isinstance(dst, str) and dst:
                    return "sentencepiece", dst
    return "literal", "\u2581"


def _from_hf_json(
    data: Mapping[str, Any],
    *,
    eos_token: int | str | None,
    vocab_size: int | None,
    extra_special: Iterable[int],
    source: str,
    warn_incomplete: bool,
) -> Vocabulary:
    """Build a vocabulary from a parsed tokenizer.json (see the module docstring's rules)."""
    model = data.get("model") or {}
    mtype = model.get("type")
    if mtype is None:  # very old files omit the type
        mtype = "Unigram" if isinstance(model.get("vocab"), list) else "BPE"
    if mtype not in ("BPE", "Unigram", "WordLevel"):
        raise UnsupportedTokenizerError(
            f"{source}: tokenizer model {mtype!r} has no byte-exact spelling rule "
            "(WordPiece spellings depend on the neighbouring token)"
        )
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise UnsupportedTokenizerError(
                f"{source}: BPE with {key}={model[key]!r} spells a token differently "
                "depending on its neighbours; there is no per-token byte spelling"
            )
    for comp in _walk_components(data.get("decoder")):
        if comp.get("type") in ("WordPiece", "BPEDecoder", "CTC"):
            raise UnsupportedTokenizerError(
                f"{source}: the {comp['type']} decoder makes spellings context-dependent"
            )
    pieces: dict[int, str] = {}
    specials: set[int] = set()
    unk_tok: object = None
    if mtype == "Unigram":
        for i, entry in enumerate(model.get("vocab") or ()):
            pieces[i] = str(entry[0])
        unk = model.get("unk_id")
        if isinstance(unk, int):
            specials.add(unk)
    else:
        for text, i in (model.get("vocab") or {}).items():
            pieces[int(i)] = str(text)
        unk_tok = model.get("unk_token")
    byte_fallback = bool(model.get("byte_fallback", False))
    scheme, marker = _detect_hf_scheme(data)
    spm_space = marker.encode()

    tb: dict[int, bytes] = {}
    for i, text in pieces.items():
        raw = text.encode("utf-8")
        if scheme == "byte-level":
            tb[i] = _spell_byte_level(raw)
        elif scheme == "sentencepiece":
            b = _parse_byte_token(raw) if byte_fallback else None
            tb[i] = bytes([b]) if b is not None else _spell_spm(raw, spm_space)
        else:
            b = _parse_byte_token(raw) if byte_fallback else None
            tb[i] = bytes([b]) if b is not None else raw
    if isinstance(unk_tok, str):
        for i, text in pieces.items():
            if text == unk_tok:
                specials.add(i)

    content_to_id: dict[str, int] = {text: i for i, text in pieces.items()}
    for tok in data.get("added_tokens") or ():
        i = int(tok["id"])
        content = str(tok["content"])
        content_to_id[content] = i
        if tok.get("special", False):
            specials.add(i)
            tb[i] = content.encode("utf-8")
        elif pieces.get(i) != content:
            # A user-defined token: literal text (llama.cpp convention). An added token that
            # merely repeats a model-vocab entry keeps the model's spelling rule.
            tb[i] = content.encode("utf-8")
    specials.update(int(i) for i in extra_special)

    if not tb:
        raise TokenizerError(f"{source}: the tokenizer has no tokens")
    size = max(tb) + 1
    if vocab_size is not None:
        if vocab_size < size:
            raise TokenizerError(
                f"{source}: vocab_size {vocab_size} is smaller than the tokenizer's {size} ids"
            )
        size = vocab_size
    spellings = [b""] * size
    for i in range(size):
        t = tb.get(i)
        if t is None:  # gap or padding row: never emitted
            specials.add(i)
        else:
            spellings[i] = t

    if eos_token is None:
        raise TokenizerError(
            f"{source}: cannot tell the EOS token; pass eos_token_id (an id or the token text)"
        )
    if isinstance(eos_token, str):
        if eos_token not in content_to_id:
            raise TokenizerError(f"{source}: EOS token {eos_token!r} is not in the vocabulary")
        eos_id = content_to_id[eos_token]
    else:
        eos_id = int(eos_token)
    return Vocabulary(
        spellings,
        eos_token_id=eos_id,
        special_ids=specials,
        scheme=scheme,
        source=source,
        warn_incomplete=warn_incomplete,
    )


# --------------------------------------------------------------------------- GGUF metadata


_GGUF_MAGIC: Final = b"GGUF"
# GGUF value types -> struct format (GGUFValueType in the gguf package / ggml's gguf.h).
_GGUF_SCALARS: Final[dict[int, str]] = {
    0: "B",  # UINT8
    1: "b",  # INT8
    2: "H",  # UINT16
    3: "h",  # INT16
    4: "I",  # UINT32
    5: "i",  # INT32
    6: "f",  # FLOAT32
    7: "?",  # BOOL
    10: "Q",  # UINT64
    11: "q",  # INT64
    12: "d",  # FLOAT64
}
_GGUF_STRING: Final = 8
_GGUF_ARRAY: Final = 9


def read_gguf_metadata(
    path: str | os.PathLike[str],
    *,
    prefix: str = "",
    skip: Iterable[str] = (),
) -> dict[str, Any]:
    """Parse the key/value header of a GGUF file (v2/v3, either byte order).

    Only keys starting with ``prefix`` and not in ``skip`` are materialised; the rest are
    stepped over. Strings come back as ``bytes`` (GGUF strings are UTF-8 but token texts are
    kept raw so nothing is lost), string arrays as ``list[bytes]``, numeric arrays as numpy
    arrays. Tensor infos and data are never read.
    """
    skip_set = frozenset(skip)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise TokenizerError(f"cannot open GGUF file {path}: {e}") from e
    with f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise GGUFFormatError(f"{path}: cannot map file (empty?): {e}") from e
        try:
            return _parse_gguf_kv(mm, str(path), prefix, skip_set)
        except (struct.error, IndexError, ValueError, OverflowError) as e:
            raise GGUFFormatError(f"{path}: truncated or corrupt GGUF header: {e}") from e
        finally:
            mm.close()


def _parse_gguf_kv(buf: mmap.mmap, path: str, prefix: str, skip: frozenset[str]) -> dict[str, Any]:
    if buf[:4] != _GGUF_MAGIC:
        raise GGUFFormatError(f"{path}: not a GGUF file (magic {buf[:4]!r})")
    (version,) = struct.unpack_from("<I", buf, 4)
    end = "<"
    if version & 0xFFFF == 0:  # written on a big-endian host
        end = ">"
        (version,) = struct.unpack_from(">I", buf, 4)
    if version not in (2, 3):
        raise GGUFFormatError(f"{path}: unsupported GGUF version {version} (need 2 or 3)")
    _n_tensors, n_kv = struct.unpack_from(end + "QQ", buf, 8)
    size = len(buf)
    off = 24
    u64 = struct.Struct(end + "Q")
    u32 = struct.Struct(end + "I")
    arr_hdr = struct.Struct(end + "IQ")

    def read_str(off: int) -> tuple[bytes, int]:
        (n,) = u64.unpack_from(buf, off)
        off += 8
        if off + n > size:
            raise GGUFFormatError(f"{path}: string runs past the end of the file")
        return buf[off : off + n], off + n

    def skip_value(vtype: int, off: int) -> int:
        if vtype == _GGUF_STRING:
            n: int = u64.unpack_from(buf, off)[0]
            return off + 8 + n
        if vtype == _GGUF_ARRAY:
            etype: int
            count: int
            etype, count = arr_hdr.unpack_from(buf, off)
            off += 12
            if etype in _GGUF_SCALARS:
                return off + count * struct.calcsize(_GGUF_SCALARS[etype])
            if etype == _GGUF_STRING:  # hot path: merges lists have ~500k entries
                unpack = u64.unpack_from
                for _ in range(count):
                    off += 8 + unpack(buf, off)[0]
                return off
            for _ in range(count):
                off = skip_value(etype, off)
            return off
        if vtype in _GGUF_SCALARS:
            return off + struct.calcsize(_GGUF_SCALARS[vtype])
        raise GGUFFormatError(f"{path}: unknown GGUF value type {vtype}")

    def read_value(vtype: int, off: int) -> tuple[Any, int]:
        if vtype == _GGUF_STRING:
            return read_str(off)
        if vtype == _GGUF_ARRAY:
            etype, count = arr_hdr.unpack_from(buf, off)
            off += 12
            if etype == _GGUF_STRING:
                items: list[bytes] = []
                append = items.append
                unpack = u64.unpack_from
                for _ in range(count):
                    (n,) = unpack(buf, off)
                    off += 8
                    append(buf[off : off + n])
                    off += n
                if off > size:
                    raise GGUFFormatError(f"{path}: string array runs past the end of the file")
                return items, off
            if etype in _GGUF_SCALARS:
                dt = np.dtype(end + _GGUF_SCALARS[etype])
                arr = np.frombuffer(buf, dtype=dt, count=count, offset=off).copy()
                return arr, off + count * dt.itemsize
            values = []
            for _ in range(count):
                v, off = read_value(etype, off)
                values.append(v)
            return values, off
        if vtype in _GGUF_SCALARS:
            fmt = end + _GGUF_SCALARS[vtype]
            (v,) = struct.unpack_from(fmt, buf, off)
            return v, off + struct.calcsize(fmt)
        raise GGUFFormatError(f"{path}: unknown GGUF value type {vtype}")

    out: dict[str, Any] = {}
    for _ in range(n_kv):
        key_b, off = read_str(off)
        key = key_b.decode("utf-8", errors="replace")
        (vtype,) = u32.unpack_from(buf, off)
        off += 4
        if key.startswith(prefix) and key not in skip:
            out[key], off = read_value(vtype, off)
        else:
            off = skip_value(vtype, off)
    return out


_SPELLING_INDEX: dict[str, dict[bytes, int]] = {}


def greedy_token_ids(vocab: Vocabulary, text: bytes, max_len: int | None = None) -> list[int]:
    """Spell ``text`` by longest match over the non-special spellings (smallest id first).

    Not the tokenizer's own segmentation: any spelling is a legal input to a matcher, and a
    deterministic one lets tests, the demo and benchmarks feed identical token sequences.
    ``max_len`` caps the match length in bytes (default: the longest spelling).
    """
    idx = _SPELLING_INDEX.get(vocab.fingerprint)
    if idx is None:
        idx = {}
        for i, b in enumerate(vocab.token_bytes):
            if b and i not in vocab.special_ids:
                idx.setdefault(b, i)
        _SPELLING_INDEX[vocab.fingerprint] = idx
    cap = max_len if max_len is not None else max((len(b) for b in idx), default=1)
    out: list[int] = []
    pos = 0
    while pos < len(text):
        for n in range(min(cap, len(text) - pos), 0, -1):
            t = idx.get(text[pos : pos + n])
            if t is not None:
                out.append(t)
                pos += n
                break
        else:
            raise TokenizerError(f"vocabulary cannot spell byte {text[pos]!r} at offset {pos}")
    return out
