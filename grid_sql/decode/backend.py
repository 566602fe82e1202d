"""Model backends behind one small interface: vocabulary, chat prompt, logits step.

The decode loop (``loop.py``) needs exactly three things from a model: a
:class:`~grid_sql.mask.vocab.Vocabulary` whose ids are the model's logit rows, the chat
template applied to messages (prompt token ids), and next-token logits after feeding tokens,
with the KV cache reused so a step costs one token's forward pass, never a re-run of the
whole sequence. Everything else (masking, picking, stopping, records) is the loop's, so both
backends produce bit-identical records for identical logits.

``LlamaCppBackend`` runs GGUF models on CPU through ``llama-cpp-python``; its logits are a
numpy view of llama.cpp's own output buffer, masked in place. ``TransformersBackend`` runs
Hugging Face checkpoints (a local directory, a GGUF file dequantized by transformers, or a
hub id) with ``past_key_values`` reuse. The libraries are imported lazily, inside methods.
"""

from __future__ import annotations

import abc
import inspect
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, OptionError, TokenizerError
from ..mask.vocab import Vocabulary
from .models import ResolvedModel, resolve_model
from .options import DEFAULT_N_CTX, BackendOptions, default_threads

__all__ = [
    "Backend",
    "LlamaCppBackend",
    "MaskApplier",
    "TransformersBackend",
    "load_backend",
]

Message = Mapping[str, str]
_LLAMA_LOAD_LOCK = threading.Lock()


class MaskApplier:
    """Applies an XGrammar-layout bitmask to a logits row in place (disallowed -> -inf).

    The per-id word index and bit are precomputed once per vocabulary size and all scratch
    buffers are preallocated, so a step allocates nothing proportional to the vocabulary
    and never copies the logits.
    """

    def __init__(self, vocab_size: int) -> None:
        ids = np.arange(vocab_size, dtype=np.int64)
        self.size = vocab_size
        self._word = (ids >> 5).astype(np.intp)
        self._bit = (np.uint32(1) << (ids & 31).astype(np.uint32)).astype(np.uint32)
        self._scratch = np.empty(vocab_size, dtype=np.uint32)
        self._blocked = np.empty(vocab_size, dtype=bool)

    def __call__(self, logits: np.ndarray, bitmask: np.ndarray) -> None:
        if logits.shape != (self.size,):
            raise ValueError(f"logits shape {logits.shape} != ({self.size},)")
        words = bitmask.view(np.uint32)
        np.take(words, self._word, out=self._scratch)
        np.bitwise_and(self._scratch, self._bit, out=self._scratch)
        np.equal(self._scratch, 0, out=self._blocked)
        np.copyto(logits, -np.inf, where=self._blocked)


class Backend(abc.ABC):
    """One loaded model and its KV cache (a single sequence; not thread-safe)."""

    #: library name recorded in audit seals ("llama.cpp", "transformers")
    library: str = ""
    #: cached prompt prefixes are reused only up to a multiple of this many tokens (None: any
    #: length); see :meth:`prefill`
    prefill_align: int | None = None
    #: the context window in tokens (prompt + generated); the prompt budget derives from it
    n_ctx: int = DEFAULT_N_CTX

    def __init__(self, vocab: Vocabulary, model_id: str) -> None:
        self.vocab = vocab
        self.model_id = model_id
        self._ids: list[int] = []  # tokens whose keys/values are in the cache

    # -- prompts ---------------------------------------------------------------------
    @abc.abstractmethod
    def chat_prompt(self, messages: Sequence[Message]) -> list[int]:
        """The model's chat template applied to ``messages``, ready for the assistant turn."""

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as plain text (no BOS, no special tokens): what a fragment of
        the prompt costs, for the prompt budget (``grid_sql.ask.budget``)."""

    def _check_room(self, n_new: int) -> None:
        if len(self._ids) + n_new > self.n_ctx:
            raise ModelError(f"context window of {self.n_ctx} tokens exceeded")

    # -- logits ----------------------------------------------------------------------
    @abc.abstractmethod
    def _forward(self, new_ids: Sequence[int]) -> np.ndarray:
        """Feed ``new_ids`` after the cached ``self._ids``; logits after the last one."""

    @abc.abstractmethod
    def _truncate(self, n: int) -> None:
        """Drop cached positions ``n..`` (keep the first ``n``)."""

    def prefill(self, prompt_ids: Sequence[int]) -> np.ndarray:
        """Start a sequence at ``prompt_ids``; the next-token logits (float32, writable).

        The longest prefix shared with the cached sequence is kept (a second question with
        the same system prompt only pays for its new tokens), rounded down to a multiple of
        :attr:`prefill_align` when set. Why: llama.cpp evaluates a prompt in chunks of
        ``n_batch`` tokens from the first position it is given, and a chunk's logits depend on
        how it is chunked (a lone re-fed last token takes another kernel path than a batch:
        on Qwen2.5-Coder Q4_K_M the logits moved by up to 0.39). Reusing only whole chunks
        makes the prompt's logits bit-identical to a fresh evaluation, so greedy output does
        not depend on what the process generated before.
        """
        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise OptionError("prompt_ids is empty: a model needs at least one token")
        k = 0
        for a, b in zip(self._ids, prompt, strict=False):
            if a != b:
                break
            k += 1
        k = min(k, len(prompt) - 1)  # the last prompt token is re-fed to get its logits
        if self.prefill_align:
            k -= k % self.prefill_align
        self._truncate(k)
        del self._ids[k:]
        return self.step(prompt[k:])

    def step(self, token_ids: Sequence[int]) -> np.ndarray:
        """Append ``token_ids`` (one forward call) and return the next-token logits.

        The array is a float32 row of length ``vocab.size`` that the caller may mask in
        place; it is only valid until the next call.
        """
        ids = [int(t) for t in token_ids]
        if not ids:
            raise OptionError("step() needs at least one token")
        logits = self._forward(ids)
        self._ids.extend(ids)
        return logits

    @property
    def n_past(self) -> int:
        """Number of positions in the KV cache."""
        return len(self._ids)

    def reset(self) -> None:
        self._truncate(0)
        self._ids.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r}, vocab={self.vocab.size})"


def _check_vocab(vocab: Vocabulary, n_vocab: int, eos_ids: set[int], what: str) -> None:
    """The vocabulary must index the model's logits and agree on EOS."""
    if vocab.size != n_vocab:
        raise TokenizerError(
            f"{what}: vocabulary has {vocab.size} ids but the model has {n_vocab} logits"
        )
    if eos_ids and vocab.eos_token_id not in eos_ids:
        raise TokenizerError(
            f"{what}: vocabulary EOS {vocab.eos_token_id} is not the model's EOS {sorted(eos_ids)}"
        )


# --------------------------------------------------------------------------- llama.cpp


class LlamaCppBackend(Backend):
    """A GGUF model via ``llama-cpp-python`` (logits as a view of llama.cpp's buffer), on CPU
    or with ``n_gpu_layers`` layers offloaded to a GPU (``-1``: all; needs a GPU build).
    ``n_threads`` None: :func:`~grid_sql.decode.options.default_threads`."""

    library = "llama.cpp"

    def __init__(
        self,
        model: str | os.PathLike[str] | ResolvedModel | None = None,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_gpu_layers: int = 0,
        vocab: Vocabulary | None = None,
        verbose: bool = False,
        extra_buffers: bool | None = None,
    ) -> None:
        resolved = model if isinstance(model, ResolvedModel) else resolve_model(model)
        if resolved.kind != "gguf":
            raise ModelError(
                f"llama.cpp loads GGUF files; {resolved.ref!r} is a {resolved.kind} model "
                "(use TransformersBackend)"
            )
        # Spinning OpenMP workers make a 2-thread decode several times slower on a shared
        # CPU (measured 7x here); libgomp reads this once, when llama.cpp first loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import llama_cpp
            import llama_cpp.llama_cpp as lc
        except ImportError as e:
            raise ModelError(
                "LlamaCppBackend needs llama-cpp-python (pip install grid-sql[local])"
            ) from e
        if extra_buffers is None:
            extra_buffers = os.environ.get("GRID_SQL_LLAMA_EXTRA_BUFFERS", "") == "1"
        if n_threads is None:
            n_threads = default_threads()
        if n_gpu_layers and not llama_cpp.llama_supports_gpu_offload():
            raise OptionError(
                f"n_gpu_layers={n_gpu_layers}: this llama-cpp-python build cannot offload to a "
                "GPU (llama_supports_gpu_offload() is false); install a CUDA/Metal/Vulkan build "
                "or use n_gpu_layers=0"
            )
        try:
            with _LLAMA_LOAD_LOCK:
                # ggml's extra buffer types (weight repacking, AMX tiles) are off by default:
                # on hosts whose kernel or sandbox does not grant AMX state, a native build
                # dies with a general-protection fault in ggml_backend_amx_mul_mat on the
                # first multi-token batch. Llama() has no switch for it, so the default
                # model parameters are wrapped for the duration of the load.
                orig = lc.llama_model_default_params

                def params() -> Any:
                    p = orig()
                    p.use_extra_bufts = bool(extra_buffers)
                    return p

                lc.llama_model_default_params = params
                try:
                    llm = llama_cpp.Llama(
                        model_path=resolved.ref,
                        n_ctx=n_ctx,
                        n_threads=n_threads,
                        n_threads_batch=n_threads,
                        n_batch=n_batch,
                        n_gpu_layers=n_gpu_layers,
                        logits_all=False,
                        verbose=verbose,
                    )
                finally:
                    lc.llama_model_default_params = orig
        except (ValueError, RuntimeError, OSError) as e:
            raise ModelError(f"llama.cpp cannot load {resolved.ref}: {e}") from e
        self._llama_cpp = llama_cpp
        self.llm = llm
        v = vocab if vocab is not None else Vocabulary.from_gguf(resolved.ref)
        _check_vocab(v, llm.n_vocab(), {llm.token_eos()}, resolved.ref)
        super().__init__(v, resolved.model_id)
        self.path = Path(resolved.ref)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_gpu_layers = n_gpu_layers
        self.prefill_align = n_batch  # llama.cpp's eval() chunks by n_batch from the start
        self._formatter: Any = None

    def chat_prompt(self, messages: Sequence[Message]) -> list[int]:
        from llama_cpp import llama_chat_format

        if self._formatter is None:
            template = self.llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise TokenizerError(f"{self.path.name} has no tokenizer.chat_template")
            model = self.llm._model
            eos = model.token_get_text(self.llm.token_eos())
            bos_id = self.llm.token_bos()
            bos = model.token_get_text(bos_id) if bos_id != -1 else ""
            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=eos, bos_token=bos
            )
            self._bos_text = bos
        text = self._formatter(messages=[dict(m) for m in messages]).prompt
        add_bos = not (self._bos_text and text.startswith(self._bos_text))
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _truncate(self, n: int) -> None:
        # llama.cpp's eval() removes cached positions >= n_tokens before decoding.
        self.llm.n_tokens = n

    def _forward(self, new_ids: Sequence[int]) -> np.ndarray:
        self._check_room(len(new_ids))
        self.llm.n_tokens = len(self._ids)
        self.llm.eval(list(new_ids))
        ptr = self.llm._ctx.get_logits_ith(-1)
        return np.ctypeslib.as_array(ptr, shape=(self.vocab.size,))


# --------------------------------------------------------------------------- transformers


class TransformersBackend(Backend):
    """A Hugging Face causal LM (torch), on CPU or GPU, with ``past_key_values`` reuse.

    ``model`` is a local model directory, a GGUF file (dequantized by transformers: needs
    the ``gguf`` package), a registry name, or a hub id (loaded by ``from_pretrained``;
    offline that fails with :class:`ModelError` instead of waiting on the network).
    ``n_ctx`` bounds prompt + generation (default 4096, at most the model's
    ``max_position_embeddings``); ``n_threads`` sets torch's intra-op threads (process-wide).
    """

    library = "transformers"

    def __init__(
        self,
        model: str | os.PathLike[str] | ResolvedModel | None = None,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        vocab: Vocabulary | None = None,
        cache_dequantized: bool = True,
        n_ctx: int | None = None,
        n_threads: int | None = None,
    ) -> None:
        resolved = model if isinstance(model, ResolvedModel) else resolve_model(model)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see LlamaCppBackend
        try:
            import torch
            import transformers
        except ImportError as e:
            raise ModelError("TransformersBackend needs torch and transformers") from e
        if n_threads is not None:
            torch.set_num_threads(n_threads)
        kw: dict[str, Any] = {}
        converted = _converted_dir(resolved, dtype) if resolved.kind == "gguf" else None
        if converted is not None and converted.is_dir():
            src = str(converted)  # a dequantized copy made on an earlier load
        elif resolved.kind == "gguf":
            src = str(Path(resolved.ref).parent)
            kw["gguf_file"] = Path(resolved.ref).name
        else:
            src = resolved.ref
        if resolved.kind == "hub":
            kw.update(_hub_access(resolved.ref))
        tok: Any
        mdl: Any
        try:
            tok = transformers.AutoTokenizer.from_pretrained(src, **kw)
            mdl = transformers.AutoModelForCausalLM.from_pretrained(
                src, dtype=getattr(torch, dtype), **kw
            )
        except (OSError, ValueError, ImportError, RuntimeError) as e:
            raise ModelError(f"transformers cannot load {resolved.ref}: {e}") from e
        if converted is not None and "gguf_file" in kw and cache_dequantized:
            _save_converted(mdl, tok, converted)
        limit = getattr(mdl.config, "max_position_embeddings", None)
        if n_ctx is not None and isinstance(limit, int) and n_ctx > limit:
            raise OptionError(
                f"n_ctx={n_ctx} exceeds {resolved.model_id}'s max_position_embeddings ({limit})"
            )
        if n_ctx is None:
            n_ctx = min(DEFAULT_N_CTX, limit) if isinstance(limit, int) else DEFAULT_N_CTX
        try:
            mdl.to(device)
        except (RuntimeError, AssertionError) as e:  # no such device, torch built without it
            raise OptionError(f"device {device!r} is not usable here: {e}") from e
        mdl.eval()
        n_vocab = int(mdl.get_output_embeddings().weight.shape[0])
        if vocab is None:
            if resolved.kind == "gguf":
                vocab = Vocabulary.from_gguf(resolved.ref)
            else:
                vocab = Vocabulary.from_hf(tok, vocab_size=n_vocab)
        eos_cfg = mdl.generation_config.eos_token_id
        eos_ids = set(
            eos_cfg if isinstance(eos_cfg, list) else [eos_cfg] if eos_cfg is not None else []
        )
        if tok.eos_token_id is not None:
            eos_ids.add(int(tok.eos_token_id))
        _check_vocab(vocab, n_vocab, eos_ids, resolved.ref)
        super().__init__(vocab, resolved.model_id)
        self._torch = torch
        self.tokenizer = tok
        self.model = mdl
        self.device = torch.device(device)
        self.n_ctx = n_ctx
        self._past: Any = None
        params = inspect.signature(mdl.forward).parameters
        # transformers 5.x renamed past_key_values to cache; keep both working.
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    def chat_prompt(self, messages: Sequence[Message]) -> list[int]:
        out: Any
        try:
            out = self.tokenizer.apply_chat_template(
                [dict(m) for m in messages], add_generation_prompt=True, tokenize=True
            )
        except (ValueError, TypeError) as e:
            raise TokenizerError(f"{self.model_id}: cannot apply the chat template: {e}") from e
        if isinstance(out, Mapping) or hasattr(out, "input_ids"):
            out = out["input_ids"]
        if out and isinstance(out[0], list):
            out = out[0]
        return [int(t) for t in out]

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def _truncate(self, n: int) -> None:
        if self._past is None:
            return
        if n == 0:
            self._past = None
            return
        cur = int(self._past.get_seq_length())
        if n < cur:
            try:
                self._past.crop(n)
            except ValueError:  # transformers >= 5.2x: crop(-k) drops the last k positions
                self._past.crop(n - cur)
        if int(self._past.get_seq_length()) != n:
            raise ModelError(f"KV cache crop to {n} left {self._past.get_seq_length()} positions")

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # older transformers
            return DynamicCache()

    def _forward(self, new_ids: Sequence[int]) -> np.ndarray:
        torch = self._torch
        self._check_room(len(new_ids))
        if self._past is None:
            self._past = self._new_cache()
        x = torch.tensor([list(new_ids)], dtype=torch.long, device=self.device)
        kw: dict[str, Any] = {self._cache_kw: self._past, "use_cache": True, **self._keep_kw}
        with torch.inference_mode():
            out = self.model(input_ids=x, **kw)
        row = out.logits[0, -1].float()
        if row.device.type != "cpu":
            row = row.cpu()
        arr: np.ndarray = row.numpy()
        return arr


def _converted_dir(resolved: ResolvedModel, dtype: str) -> Path:
    """Where the dequantized copy of a GGUF model lives: next to it, keyed by size+mtime.

    transformers dequantizes a GGUF file on every load, parsing its metadata three times
    (minutes for 135M parameters on a busy 2-core machine); a safetensors copy loads in
    seconds. The key changes when the GGUF file does, so a stale copy is never used.
    """
    p = Path(resolved.ref)
    st = p.stat()
    return p.parent / f".{p.name}.{dtype}.{st.st_size:x}-{int(st.st_mtime):x}.hf"


def _save_converted(model: Any, tokenizer: Any, target: Path) -> None:
    """Save a GGUF-loaded model as a plain checkpoint (tmp dir + rename; best effort)."""
    import tempfile

    from safetensors.torch import save_model

    try:
        with tempfile.TemporaryDirectory(prefix=".convert-", dir=target.parent) as tmp:
            d = Path(tmp) / "m"
            d.mkdir()
            config = model.config
            if hasattr(config, "quantization_config"):
                del config.quantization_config  # dequantized: a plain float checkpoint
            config.save_pretrained(d)
            model.generation_config.save_pretrained(d)
            save_model(model, str(d / "model.safetensors"))
            tokenizer.save_pretrained(d)
            os.replace(d, target)
    except OSError:
        pass  # a read-only or full cache only costs the next load its time


def _hub_access(repo_id: str) -> dict[str, Any]:
    """``from_pretrained`` options for a hub id: the local cache if it has the model, else
    the network, but only after a quick reachability probe (huggingface_hub otherwise
    retries a dead endpoint for a minute or more before giving up)."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    cached = try_to_load_from_cache(repo_id, "config.json")
    if isinstance(cached, str) or constants.HF_HUB_OFFLINE:
        return {"local_files_only": True}
    url = urlparse(constants.ENDPOINT)
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as e:
        raise ModelError(
            f"{repo_id!r} is not in the local Hugging Face cache and the hub ({host}) is "
            f"unreachable ({e}); pass a local model directory or GGUF file, or a registry "
            "name (grid-sql models list)"
        ) from e
    return {}


def load_backend(
    model: str | os.PathLike[str] | None = None,
    *,
    backend: str = "auto",
    options: BackendOptions | None = None,
    **kw: Any,
) -> Backend:
    """A backend for ``model``: llama.cpp for GGUF (``auto``), transformers otherwise.
    ``options``: context size, threads and placement (``grid_sql.decode.options``); explicit
    ``kw`` win over them."""
    resolved = resolve_model(model)
    if backend == "auto":
        backend = "llama.cpp" if resolved.kind == "gguf" else "transformers"
    if backend in ("llama.cpp", "llamacpp", "llama_cpp"):
        return LlamaCppBackend(resolved, **{**(options.llama_kwargs() if options else {}), **kw})
    if backend == "transformers":
        extra = options.transformers_kwargs() if options else {}
        return TransformersBackend(resolved, **{**extra, **kw})
    raise ModelError(f"unknown backend {backend!r} (llama.cpp, transformers, auto)")
