"""Tokenizer readers: GGUF metadata, Hugging Face ``tokenizer.json`` (file or live object),
tiktoken ranks files.

Each reader undoes its format's storage (:mod:`grid_sql.mask.spelling`) and returns a
:class:`RawVocab`, the plain data a :class:`~grid_sql.mask.vocab.Vocabulary` is built from;
the vocabulary owns the checks (completeness, fingerprint). A new tokenizer family is a new
reader here, nothing else (llguidance keeps its tokenizer adapters small and apart the same way).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from grid_sql.errors import TokenizerError
from grid_sql.mask.spelling import (
    _SPM_SPACE,
    _TT_BYTE,
    _TT_NORMAL,
    _TT_USER_DEFINED,
    GGUFFormatError,
    SpellingScheme,
    UnsupportedTokenizerError,
    _parse_byte_token,
    _spell_byte_level,
    _spell_spm,
)


@dataclass(frozen=True)
class RawVocab:
    """What a reader found: every id's byte spelling, EOS, the special ids, the rule used."""

    token_bytes: Sequence[bytes]
    eos_token_id: int
    special_ids: Iterable[int]
    scheme: SpellingScheme
    source: str


# --------------------------------------------------------------------------- tiktoken


def read_tiktoken(
    path: str | os.PathLike[str], *, special_tokens: Mapping[str, int], eos_token: str
) -> RawVocab:
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
    return RawVocab(
        tb,
        eos_token_id=special_tokens[eos_token],
        special_ids=specials,
        scheme="bytes",
        source=str(path),
    )


# --------------------------------------------------------------------------- GGUF


def read_gguf(path: str | os.PathLike[str], *, eos_token_id: int | None = None) -> RawVocab:
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
    return RawVocab(
        tb,
        eos_token_id=int(eos),
        special_ids=specials,
        scheme=scheme,
        source=f"{path} (gguf:{model})",
    )


def read_tokenizer_json(
    path: str | os.PathLike[str], *, eos_token_id: int | str | None, vocab_size: int | None
) -> RawVocab:
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
    )


def read_hf(tokenizer: Any, *, eos_token_id: int | str | None, vocab_size: int | None) -> RawVocab:
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
) -> RawVocab:
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
    return RawVocab(
        spellings,
        eos_token_id=eos_id,
        special_ids=specials,
        scheme=scheme,
        source=source,
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
