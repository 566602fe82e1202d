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
:attr:`Vocabulary.byte_complete`. The formats are read in :mod:`grid_sql.mask.readers` and the
spelling rules live in :mod:`grid_sql.mask.spelling`; this module keeps the vocabulary itself.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

# grid_sql/errors.py (owned by the errors engineer) already defines TokenizerError in the one
# exception hierarchy, so it is re-used rather than shadowed by a second class of that name.
from grid_sql.errors import TokenizerError
from grid_sql.mask.readers import (
    RawVocab,
    read_gguf,
    read_gguf_metadata,
    read_hf,
    read_tiktoken,
    read_tokenizer_json,
)
from grid_sql.mask.spelling import (
    _NON_UTF8_BYTES,
    SPM_LEADING_SPACE_RULE,
    GGUFFormatError,
    SpellingScheme,
    UnsupportedTokenizerError,
    byte_level_decode,
    gpt2_bytes_to_unicode,
)

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


class VocabularyWarning(UserWarning):
    """Something about a vocabulary weakens a guarantee without making it unusable."""


class VocabularyIncompleteWarning(VocabularyWarning):
    """Some byte value has no single-byte non-special token: completeness is void.

    Soundness is unaffected (masks never admit a token whose bytes leave the language), but
    Proposition 8 (completeness / dead-end freedom) no longer holds: a viable prefix whose
    only continuations start with a missing byte may have no legal token.
    """


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
        raw = read_tiktoken(path, special_tokens=special_tokens, eos_token=eos_token)
        return cls._from_raw(raw, warn_incomplete)

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
        return cls._from_raw(read_gguf(path, eos_token_id=eos_token_id), warn_incomplete)

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
        raw = read_tokenizer_json(path, eos_token_id=eos_token_id, vocab_size=vocab_size)
        return cls._from_raw(raw, warn_incomplete)

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
        raw = read_hf(tokenizer, eos_token_id=eos_token_id, vocab_size=vocab_size)
        return cls._from_raw(raw, warn_incomplete)

    @classmethod
    def _from_raw(cls, raw: RawVocab, warn_incomplete: bool) -> Vocabulary:
        return cls(
            raw.token_bytes,
            eos_token_id=raw.eos_token_id,
            special_ids=raw.special_ids,
            scheme=raw.scheme,
            source=raw.source,
            warn_incomplete=warn_incomplete,
        )


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
