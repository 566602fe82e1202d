"""Vocabulary spellings against real tokenizers (llama.cpp's own test vectors).

The shared GGUF vocabularies come with llama.cpp's tokenizer test vectors: ``.inp`` holds
input texts separated by a ``__ggml_vocab_test__`` marker line, ``.out`` one line of
expected token ids per text. Whatever the tokenizer did, the concatenated spellings of the
ids it produced must give back the text's UTF-8 bytes: that is the property the trie walk
relies on (paper §2, "Tokens are byte strings").
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import struct
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from grid_sql.errors import GridSQLError
from grid_sql.mask.vocab import (
    SPM_LEADING_SPACE_RULE,
    GGUFFormatError,
    TokenizerError,
    UnsupportedTokenizerError,
    Vocabulary,
    VocabularyIncompleteWarning,
    byte_level_decode,
    gpt2_bytes_to_unicode,
    read_gguf_metadata,
)

TOKENIZERS = Path(os.environ.get("GRID_SQL_TOKENIZER_DIR", "/work/shared/data/tokenizers"))
ALL_VOCABS = [
    "gpt-2",
    "qwen2",
    "llama-bpe",
    "llama-spm",
    "phi-3",
    "starcoder",
    "deepseek-coder",
    "gemma-4",
]
MARKER = "\n__ggml_vocab_test__\n"


def gguf_path(name: str) -> Path:
    path = TOKENIZERS / f"ggml-vocab-{name}.gguf"
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


@functools.cache
def load_vocab(name: str) -> Vocabulary:
    """Load once per test session (warnings about incompleteness are tested separately)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        return Vocabulary.from_gguf(gguf_path(name))


def read_vectors(name: str) -> list[tuple[str, list[int]]]:
    """Parse llama.cpp's ``.inp``/``.out`` pair into (text, expected ids) cases.

    The ``.inp`` file is the texts joined by MARKER, usually with a trailing MARKER (the
    Gemma file has none); ``.out`` has one space-separated id list per text.
    """
    path = gguf_path(name)
    raw = Path(f"{path}.inp").read_bytes().decode("utf-8")
    texts = raw.split(MARKER)
    if texts[-1] == "":
        texts.pop()
    lines = Path(f"{path}.out").read_text(encoding="utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    assert len(texts) == len(lines), (name, len(texts), len(lines))
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines, strict=True)]


@functools.cache
def adds_space_prefix(name: str) -> bool:
    """Whether llama.cpp prefixed a space when it produced the vectors (SPM_LEADING_SPACE_RULE).

    llama.cpp's SentencePiece tokenizer ('llama' model) adds a leading space to a non-empty
    text unless ``tokenizer.ggml.add_space_prefix`` is false; BPE models never do.
    """
    meta = read_gguf_metadata(
        gguf_path(name), prefix="tokenizer.ggml.", skip={"tokenizer.ggml.merges"}
    )
    model = bytes(meta["tokenizer.ggml.model"]).decode()
    return model == "llama" and bool(meta.get("tokenizer.ggml.add_space_prefix", True))


def expected_bytes(name: str, text: str) -> bytes:
    data = text.encode("utf-8")
    return b" " + data if data and adds_space_prefix(name) else data


# ------------------------------------------------------------------------- real vectors


@pytest.mark.parametrize("name", ALL_VOCABS)
def test_vectors_concatenate_to_input(name: str) -> None:
    vocab = load_vocab(name)
    cases = read_vectors(name)
    assert len(cases) >= 40
    for text, ids in cases:
        assert all(0 <= i < vocab.size for i in ids)
        assert not any(vocab.is_special(i) for i in ids), text
        assert vocab.spell(ids) == expected_bytes(name, text), text


def test_spm_leading_space_rule_is_the_one_applied() -> None:
    assert adds_space_prefix("llama-spm") and adds_space_prefix("phi-3")
    assert not adds_space_prefix("gemma-4") and not adds_space_prefix("gpt-2")
    assert "add_space_prefix" in SPM_LEADING_SPACE_RULE
    # The rule matters: without the prefix the SPM vectors do not match.
    vocab = load_vocab("llama-spm")
    text, ids = read_vectors("llama-spm")[0]
    assert vocab.spell(ids) != text.encode()


@pytest.mark.parametrize("name", ALL_VOCABS)
def test_round_trip_through_token_bytes(name: str) -> None:
    vocab = load_vocab(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        again = Vocabulary.from_token_bytes(
            vocab.token_bytes, eos_token_id=vocab.eos_token_id, special_ids=vocab.special_ids
        )
    assert again.fingerprint == vocab.fingerprint
    assert again == vocab and hash(again) == hash(vocab)
    assert again.missing_bytes == vocab.missing_bytes


def test_gemma_loads_quickly() -> None:
    """The 262k vocabulary must not need the `slow` mark (budget: 10 s, measured ~0.5-1 s)."""
    path = gguf_path("gemma-4")
    t0 = time.perf_counter()
    vocab = Vocabulary.from_gguf(path)
    assert time.perf_counter() - t0 < 10
    assert vocab.size == 262144 and vocab.byte_complete


# ------------------------------------------------------------------------- spelling rules


def test_gpt2_byte_map_is_a_bijection() -> None:
    m = gpt2_bytes_to_unicode()
    assert sorted(m) == list(range(256)) and len(set(m.values())) == 256
    assert m[0x20] == "Ġ" and m[0x0A] == "Ċ" and m[ord("A")] == "A"
    assert byte_level_decode("".join(m[b] for b in range(256))) == bytes(range(256))
    assert byte_level_decode("a b") is None  # a raw space is not an image of the map


def test_byte_level_spellings() -> None:
    gpt2 = load_vocab("gpt-2")
    assert gpt2.scheme == "byte-level"
    assert gpt2.token_bytes[220] == b" " and gpt2.token_bytes[198] == b"\n"
    assert gpt2.token_bytes[995] == b" world"
    assert gpt2.special_ids == {50256} and gpt2.eos_token_id == 50256
    assert gpt2.token_bytes[50256] == b"<|endoftext|>"  # display only
    llama3 = load_vocab("llama-bpe")
    assert len(llama3.special_ids) == 256 and llama3.eos_token_id == 128001
    assert set(range(128000, 128256)) == llama3.special_ids
    qwen = load_vocab("qwen2")
    assert qwen.size == 151936 and qwen.special_ids == {151643, 151644, 151645}
    # Qwen's user-defined padding tokens are spelled literally (llama.cpp convention).
    assert qwen.token_bytes[151646] == b"[PAD151646]"


def test_sentencepiece_spellings() -> None:
    spm = load_vocab("llama-spm")
    assert spm.scheme == "sentencepiece"
    assert spm.token_bytes[29871] == b" "  # "▁"
    assert spm.token_bytes[13] == b"\n"  # "<0x0A>"
    assert spm.token_bytes[3] == b"\x00" and spm.token_bytes[258] == b"\xff"
    assert spm.special_ids == {0, 1, 2}  # <unk> (unknown), <s>, </s> (control)
    # Alias class: the byte-fallback token <0x20> and "▁" spell the same byte.
    assert [i for i, t in enumerate(spm.token_bytes) if t == b" "] == [35, 29871]
    phi3 = load_vocab("phi-3")
    assert phi3.eos_token_id == 32000 and 32000 in phi3.special_ids
    assert phi3.token_bytes[2] == b"</s>" and 2 not in phi3.special_ids  # user-defined
    assert all(i in phi3.special_ids for i in range(32011, 32064))  # unknown [PAD] rows
    gemma = load_vocab("gemma-4")
    assert gemma.eos_token_id == 1 and {0, 1, 2, 3, 4} <= gemma.special_ids
    assert gemma.token_bytes[238] == b"\x00"  # <0x00>


def test_user_defined_tokens_are_literal_utf8() -> None:
    ds = load_vocab("deepseek-coder")
    # DeepSeek's added "õ" is stored as user-defined: literal text, not the byte 0xF5.
    assert ds.token_bytes[32000] == "õ".encode()
    assert 32000 not in ds.special_ids


# ------------------------------------------------------------------------- completeness


@pytest.mark.parametrize("name", ["gpt-2", "qwen2", "llama-bpe", "llama-spm", "phi-3", "gemma-4"])
def test_complete_vocabularies(name: str) -> None:
    vocab = load_vocab(name)
    assert vocab.byte_complete and vocab.missing_bytes == () and vocab.utf8_byte_complete


def test_incomplete_vocabularies_warn() -> None:
    with pytest.warns(VocabularyIncompleteWarning, match="completeness still holds for UTF-8"):
        ds = Vocabulary.from_gguf(gguf_path("deepseek-coder"))
    assert not ds.byte_complete and ds.utf8_byte_complete
    assert ds.missing_bytes == (0xC0, 0xC1, *range(0xF5, 0x100))
    with pytest.warns(VocabularyIncompleteWarning, match="0xF1"):
        sc = Vocabulary.from_gguf(gguf_path("starcoder"))
    assert not sc.byte_complete and not sc.utf8_byte_complete and 0xF1 in sc.missing_bytes


def test_completeness_ignores_special_and_multibyte_tokens() -> None:
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"<eos>"]
    full = Vocabulary.from_token_bytes(tokens, eos_token_id=257)
    assert full.byte_complete
    # Byte 0x41 only reachable through a special token: not reachable.
    with pytest.warns(VocabularyIncompleteWarning):
        v = Vocabulary.from_token_bytes(tokens, eos_token_id=257, special_ids=[0x41])
    assert v.missing_bytes == (0x41,) and not v.utf8_byte_complete
    # ... nor through a longer token that merely starts with it.
    tokens2 = [t if t != b"a" else b"aa" for t in tokens]
    with pytest.warns(VocabularyIncompleteWarning):
        v2 = Vocabulary.from_token_bytes(tokens2, eos_token_id=257)
    assert v2.missing_bytes == (ord("a"),)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Vocabulary.from_token_bytes(tokens2, eos_token_id=257, warn_incomplete=False)


# ------------------------------------------------------------------------- the object


def small_vocab(**kw: object) -> Vocabulary:
    kw.setdefault("eos_token_id", 3)
    kw.setdefault("warn_incomplete", False)
    return Vocabulary.from_token_bytes([b"a", b"b", b"ab", b"</s>", b""], **kw)  # type: ignore[arg-type]


def test_eos_is_special_and_immutable() -> None:
    v = small_vocab()
    assert v.special_ids == {3} and v.size == len(v) == 5
    assert v.empty_ids == (4,)
    with pytest.raises(AttributeError):
        v.eos_token_id = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        v._token_bytes = ()  # type: ignore[misc]
    assert isinstance(v.token_bytes, tuple) and isinstance(v.special_ids, frozenset)
    again = pickle.loads(pickle.dumps(v))
    assert again == v and again.empty_ids == (4,) and again.source == v.source
    with pytest.raises(AttributeError):
        again.eos_token_id = 0  # type: ignore[misc]


def test_fingerprint_covers_every_field() -> None:
    base = small_vocab()
    assert len(base.fingerprint) == 64 and int(base.fingerprint, 16) >= 0
    assert small_vocab().fingerprint == base.fingerprint
    others = [
        small_vocab(eos_token_id=2),
        small_vocab(special_ids=[0]),
        Vocabulary.from_token_bytes(
            [b"a", b"b", b"ab", b"</s>", b"x"], eos_token_id=3, warn_incomplete=False
        ),
        # Same concatenation, different split: the lengths must be hashed too.
        Vocabulary.from_token_bytes(
            [b"a", b"ba", b"b", b"</s>", b""], eos_token_id=3, warn_incomplete=False
        ),
    ]
    prints = {o.fingerprint for o in others}
    assert base.fingerprint not in prints and len(prints) == len(others)
    # Metadata that does not change any spelling does not change the fingerprint.
    assert small_vocab(source="elsewhere").fingerprint == base.fingerprint


def test_constructor_validation() -> None:
    with pytest.raises(TokenizerError, match="outside"):
        Vocabulary.from_token_bytes([b"a"], eos_token_id=1)
    with pytest.raises(TokenizerError, match="outside"):
        Vocabulary.from_token_bytes([b"a", b"b"], eos_token_id=1, special_ids=[5])
    with pytest.raises(TokenizerError, match="must be bytes"):
        Vocabulary.from_token_bytes(["a", b"b"], eos_token_id=1)  # type: ignore[list-item]
    with pytest.raises(TokenizerError, match="at least one"):
        Vocabulary.from_token_bytes([], eos_token_id=0)
    assert issubclass(TokenizerError, GridSQLError)


def test_tiktoken_file(tmp_path: Path) -> None:
    import base64

    ranks = [bytes([b]) for b in range(256)] + [b"SELECT", b" FROM"]
    path = tmp_path / "toy.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(ranks)))
    v = Vocabulary.from_tiktoken_file(
        path, special_tokens={"<|endoftext|>": 260}, eos_token="<|endoftext|>"
    )
    assert v.size == 261 and v.token_bytes[256] == b"SELECT" and v.byte_complete
    assert v.special_ids == {258, 259, 260}  # gaps are special too
    assert v.token_bytes[260] == b"<|endoftext|>"


# ------------------------------------------------------------------------- GGUF reader


def test_gguf_reader_agrees_with_gguf_package() -> None:
    gguf = pytest.importorskip("gguf")
    path = gguf_path("llama-spm")
    ours = read_gguf_metadata(path)
    reader = gguf.GGUFReader(str(path))
    for key in (
        "tokenizer.ggml.model",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.bos_token_id",
    ):
        field = reader.fields[key]
        theirs = field.contents()
        mine = ours[key]
        assert (bytes(mine).decode() if isinstance(mine, bytes) else mine) == theirs
    tokens = reader.fields["tokenizer.ggml.tokens"]
    theirs_tokens = [bytes(tokens.parts[i]) for i in tokens.data]
    assert ours["tokenizer.ggml.tokens"] == theirs_tokens
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    assert ours["tokenizer.ggml.token_type"].tolist() == list(types)
    scores = reader.fields["tokenizer.ggml.scores"].contents()
    assert np.allclose(ours["tokenizer.ggml.scores"], scores)


def write_gguf(path: Path, model: str, tokens: list[str], types: list[int], eos: int, **extra):
    """A tiny GGUF via the gguf package's writer (optionally with a tensor)."""
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_eos_token_id(eos)
    tensor = extra.get("tensor")
    if tensor is not None:
        w.add_tensor("weights", tensor)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_full_model_gguf_reads_only_metadata(tmp_path: Path) -> None:
    """A model file with a large tensor loads as fast as a vocab-only one."""
    path = tmp_path / "model.gguf"
    tokens = [*gpt2_bytes_to_unicode().values(), "Ġworld", "<|eos|>"]
    types = [1] * 257 + [3]
    weights = np.ones((64, 1024, 1024), dtype=np.float32)  # 256 MiB of tensor data
    write_gguf(path, "gpt2", tokens, types, eos=257, tensor=weights)
    del weights
    assert path.stat().st_size > 256 * 2**20
    t0 = time.perf_counter()
    v = Vocabulary.from_gguf(path)
    assert time.perf_counter() - t0 < 1.0
    assert v.byte_complete and v.token_bytes[256] == b" world" and v.special_ids == {257}


def test_gguf_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(100))
    with pytest.raises(GGUFFormatError, match="not a GGUF"):
        Vocabulary.from_gguf(bad)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(GGUFFormatError):
        Vocabulary.from_gguf(empty)
    with pytest.raises(TokenizerError, match="cannot open"):
        Vocabulary.from_gguf(tmp_path / "missing.gguf")
    # Truncated in the middle of the token list.
    data = gguf_path("llama-spm").read_bytes()[:5000]
    trunc = tmp_path / "trunc.gguf"
    trunc.write_bytes(data)
    with pytest.raises(GGUFFormatError):
        Vocabulary.from_gguf(trunc)
    # Future version.
    future = tmp_path / "future.gguf"
    future.write_bytes(b"GGUF" + struct.pack("<IQQ", 99, 0, 0))
    with pytest.raises(GGUFFormatError, match="version 99"):
        Vocabulary.from_gguf(future)
    # Metadata without tokenizer keys.
    nokeys = tmp_path / "nokeys.gguf"
    nokeys.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    with pytest.raises(GGUFFormatError, match="tokenizer.ggml.model"):
        Vocabulary.from_gguf(nokeys)


def test_gguf_unsupported_model_and_bad_byte_token(tmp_path: Path) -> None:
    bert = tmp_path / "bert.gguf"
    write_gguf(bert, "bert", ["[CLS]", "a", "##b"], [3, 1, 1], eos=0)
    with pytest.raises(UnsupportedTokenizerError, match="'bert'"):
        Vocabulary.from_gguf(bert)
    spm = tmp_path / "spm.gguf"
    write_gguf(spm, "llama", ["</s>", "<0xZZ>"], [3, 6], eos=0)
    with pytest.raises(GGUFFormatError, match="byte token 1"):
        Vocabulary.from_gguf(spm)


# ------------------------------------------------------------------------- Hugging Face


def hf_from_gguf_bpe(name: str):
    """A ``tokenizers.Tokenizer`` rebuilt from a byte-level BPE GGUF (vocab + merges)."""
    tk = pytest.importorskip("tokenizers")
    meta = read_gguf_metadata(gguf_path(name), prefix="tokenizer.ggml.")
    tokens = [bytes(t).decode() for t in meta["tokenizer.ggml.tokens"]]
    types = meta["tokenizer.ggml.token_type"].tolist()
    merges = [tuple(bytes(m).decode().split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = tk.Tokenizer(tk.models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens(
        [tk.AddedToken(t, special=True) for t, ty in zip(tokens, types, strict=True) if ty == 3]
    )
    return tok


def hf_from_gguf_spm(name: str, kind: str):
    """A ``tokenizers.Tokenizer`` rebuilt from a SentencePiece GGUF.

    ``kind='unigram'``: Unigram model with scores, Metaspace pre-tokenizer and decoder.
    ``kind='bpe'``: the Llama-2 ``tokenizer.json`` shape (BPE with byte_fallback, a
    Prepend/Replace normalizer and a Replace/ByteFallback/Fuse/Strip decoder); no merges,
    so it tokenizes into single pieces, which is all the spelling test needs.
    """
    tk = pytest.importorskip("tokenizers")
    meta = read_gguf_metadata(gguf_path(name), prefix="tokenizer.ggml.")
    tokens = [bytes(t).decode() for t in meta["tokenizer.ggml.tokens"]]
    types = meta["tokenizer.ggml.token_type"].tolist()
    unk = int(meta["tokenizer.ggml.unknown_token_id"])
    if kind == "unigram":
        scores = meta["tokenizer.ggml.scores"].tolist()
        model = tk.models.Unigram(list(zip(tokens, scores, strict=True)), unk, byte_fallback=True)
        tok = tk.Tokenizer(model)
        tok.pre_tokenizer = tk.pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = tk.decoders.Metaspace(replacement="▁", prepend_scheme="first")
    else:
        vocab = {t: i for i, t in enumerate(tokens)}
        tok = tk.Tokenizer(
            tk.models.BPE(vocab=vocab, merges=[], unk_token=tokens[unk], byte_fallback=True)
        )
        tok.normalizer = tk.normalizers.Sequence(
            [tk.normalizers.Prepend("▁"), tk.normalizers.Replace(" ", "▁")]
        )
        tok.decoder = tk.decoders.Sequence(
            [
                tk.decoders.Replace("▁", " "),
                tk.decoders.ByteFallback(),
                tk.decoders.Fuse(),
                tk.decoders.Strip(" ", 1, 0),
            ]
        )
    special = [
        tk.AddedToken(t, special=True) for t, ty in zip(tokens, types, strict=True) if ty in (2, 3)
    ]
    tok.add_special_tokens(special)
    user = [tk.AddedToken(t, special=False) for t, ty in zip(tokens, types, strict=True) if ty == 4]
    tok.add_tokens(user)
    return tok


@pytest.mark.parametrize("name", ["gpt-2", "qwen2", "starcoder"])
def test_tokenizer_json_byte_level_matches_gguf(name: str, tmp_path: Path) -> None:
    tok = hf_from_gguf_bpe(name)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    gguf_vocab = load_vocab(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        vocab = Vocabulary.from_tokenizer_json(
            path, eos_token_id=gguf_vocab.eos_token_id, vocab_size=gguf_vocab.size
        )
    assert vocab.scheme == "byte-level"
    assert vocab.fingerprint == gguf_vocab.fingerprint
    # Round trip through the HF tokenizer: encode each vector, spell the ids.
    for text, _ in read_vectors(name):
        ids = tok.encode(text, add_special_tokens=False).ids
        assert vocab.spell(ids) == text.encode(), text
        assert tok.decode(ids) == text


@pytest.mark.parametrize("kind", ["unigram", "bpe"])
@pytest.mark.parametrize("name", ["llama-spm", "phi-3"])
def test_tokenizer_json_sentencepiece_matches_gguf(name: str, kind: str, tmp_path: Path) -> None:
    tok = hf_from_gguf_spm(name, kind)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    gguf_vocab = load_vocab(name)
    vocab = Vocabulary.from_tokenizer_json(path, eos_token_id=gguf_vocab.eos_token_id)
    assert vocab.scheme == "sentencepiece"
    assert vocab.token_bytes == gguf_vocab.token_bytes
    assert vocab.special_ids == gguf_vocab.special_ids
    assert vocab.fingerprint == gguf_vocab.fingerprint
    for text, _ in read_vectors(name):
        ids = tok.encode(text, add_special_tokens=False).ids
        # What the tokenizer actually encodes: the text after its own prefix-space rule
        # (HF's Metaspace prepends "▁" only if the text does not already start with one,
        # unlike llama.cpp), with "▁" read back as a space.
        if kind == "unigram":
            pieces = tok.pre_tokenizer.pre_tokenize_str(text)
            seen = "".join(p for p, _ in pieces)
        else:
            seen = tok.normalizer.normalize_str(text)
        assert vocab.spell(ids) == seen.replace("▁", " ").encode(), text
        if kind == "unigram" and text and not text.startswith(" "):
            assert vocab.spell(ids) == b" " + text.encode()


def test_tokenizer_json_eos_from_config_and_errors(tmp_path: Path) -> None:
    tok = hf_from_gguf_spm("llama-spm", "unigram")
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    with pytest.raises(TokenizerError, match="EOS"):
        Vocabulary.from_tokenizer_json(path)
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": {"content": "</s>", "special": True}})
    )
    assert Vocabulary.from_tokenizer_json(path).eos_token_id == 2
    assert Vocabulary.from_tokenizer_json(path, eos_token_id="<s>").eos_token_id == 1
    with pytest.raises(TokenizerError, match="not in the vocabulary"):
        Vocabulary.from_tokenizer_json(path, eos_token_id="<nope>")
    with pytest.raises(TokenizerError, match="smaller"):
        Vocabulary.from_tokenizer_json(path, vocab_size=10)
    padded = Vocabulary.from_tokenizer_json(path, vocab_size=32010)
    assert padded.size == 32010 and set(range(32000, 32010)) <= padded.special_ids
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(TokenizerError, match="cannot read"):
        Vocabulary.from_tokenizer_json(tmp_path / "broken.json", eos_token_id=0)


def test_context_dependent_spellings_are_unsupported(tmp_path: Path) -> None:
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    with pytest.raises(UnsupportedTokenizerError, match="WordPiece"):
        Vocabulary.from_hf(tok, eos_token_id=0)
    clip = tk.Tokenizer(tk.models.BPE({"a</w>": 0, "b": 1}, [], end_of_word_suffix="</w>"))
    with pytest.raises(UnsupportedTokenizerError, match="end_of_word_suffix"):
        Vocabulary.from_hf(clip, eos_token_id=0)
    bpe = tk.Tokenizer(tk.models.BPE({"a": 0, "b": 1}, []))
    bpe.decoder = tk.decoders.BPEDecoder()
    with pytest.raises(UnsupportedTokenizerError, match="BPEDecoder"):
        Vocabulary.from_hf(bpe, eos_token_id=0)


def test_gguf_eos_override() -> None:
    path = gguf_path("llama-bpe")
    v = Vocabulary.from_gguf(path, eos_token_id=128009)  # <|eot_id|>
    assert v.eos_token_id == 128009 and {128001, 128009} <= v.special_ids
    assert v.fingerprint != load_vocab("llama-bpe").fingerprint


def test_literal_scheme_and_non_special_added_tokens() -> None:
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.WordLevel({"a": 0, "b b": 1, "<unk>": 2}, unk_token="<unk>"))
    tok.add_tokens([tk.AddedToken("SELECT *", special=False)])
    tok.add_special_tokens(["<eos>"])
    with pytest.warns(VocabularyIncompleteWarning) as rec:
        v = Vocabulary.from_hf(tok, eos_token_id="<eos>")
    assert rec[0].filename == __file__  # the warning points at the caller
    assert v.scheme == "literal"
    assert v.token_bytes[:4] == (b"a", b"b b", b"<unk>", b"SELECT *")
    assert v.special_ids == {2, 4} and v.eos_token_id == 4


class FakeFastTokenizer:
    """The slice of a transformers ``PreTrainedTokenizerFast`` that ``from_hf`` uses."""

    def __init__(self, backend, eos_token_id: int, all_special_ids: list[int]) -> None:
        self.backend_tokenizer = backend
        self.eos_token_id = eos_token_id
        self.all_special_ids = all_special_ids


def test_from_hf_objects() -> None:
    tok = hf_from_gguf_bpe("gpt-2")
    gguf_vocab = load_vocab("gpt-2")
    assert Vocabulary.from_hf(tok, eos_token_id=50256).fingerprint == gguf_vocab.fingerprint
    fast = FakeFastTokenizer(tok, eos_token_id=50256, all_special_ids=[50256])
    assert Vocabulary.from_hf(fast).fingerprint == gguf_vocab.fingerprint
    # all_special_ids are honoured even when the backend does not mark them special.
    fast2 = FakeFastTokenizer(tok, eos_token_id=50256, all_special_ids=[50256, 0])
    with pytest.warns(VocabularyIncompleteWarning, match="0x21"):  # id 0 is "!"
        assert Vocabulary.from_hf(fast2).special_ids == {0, 50256}
    with pytest.raises(UnsupportedTokenizerError, match="cannot adapt"):
        Vocabulary.from_hf(object())
