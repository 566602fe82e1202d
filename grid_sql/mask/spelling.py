"""Token spelling rules: how each tokenizer family stores a token's bytes (paper §2).

The byte-level BPE map, SentencePiece's space marker and ``<0xNN>`` byte tokens, and the GGUF
token types: shared by the readers (:mod:`grid_sql.mask.readers`, which undo them) and the
vocabulary (:mod:`grid_sql.mask.vocab`, whose module docstring states the rules). Kept apart
so that neither of those two imports the other.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from grid_sql.errors import TokenizerError


class GGUFFormatError(TokenizerError):
    """A GGUF file is truncated, has a bad magic/version, or lacks the tokenizer metadata."""


class UnsupportedTokenizerError(TokenizerError):
    """The tokenizer family has no byte-exact spelling rule here (e.g. WordPiece, RWKV)."""


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
