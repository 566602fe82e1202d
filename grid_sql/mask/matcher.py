"""Per-request matchers: the mutable half of the masking API (paper §6.1).

A :class:`~grid_sql.mask.guide.Guide` is immutable and shared; a :class:`Matcher` is one
request's position in it (configuration, history for rollback, the tokens so far). Kept apart
from the guide so the state a caller owns reads on its own; the fills it asks for are the
guide's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import MaskError, TokenRejected
from ..parser.incremental import Configuration

if TYPE_CHECKING:
    from .guide import Guide, _Warm
    from .reserve import ReserveTable

MAX_FORCED = 64
_I32 = np.dtype(np.int32)


class Matcher:
    """Per-request matcher state: the current configuration and its history."""

    def __init__(self, guide: Guide, max_tokens: int | None = None) -> None:
        self.guide = guide
        self.config: Configuration = guide.runtime.initial
        self._history: list[Configuration] = []
        self.tokens: list[int] = []
        self.terminated = False
        self.max_tokens = max_tokens
        self._scratch: np.ndarray | None = None  # forced_tokens' row, allocated on first use
        self._w: _Warm | None = None  # warm record of self.config (checked by identity)

    def _warm(self) -> _Warm:
        w = self._w
        if w is None or w.cfg is not self.config:  # config set from outside or rolled back
            w = self._w = self.guide._warm_for(self.config)
        return w

    def warm_record(self) -> _Warm:
        """The guide's warm record of this matcher's configuration, for a batched fill
        (:func:`~grid_sql.mask.guide.fill_rows` ``records=``)."""
        return self._warm()

    # -- masks --------------------------------------------------------------------------
    def fill_next_token_bitmask(self, buf: np.ndarray) -> int:
        """Fill ``buf`` (int32, ceil(V/32) words) in place; returns the allowed count."""
        if self.terminated:
            buf[:] = 0
            return 0
        w = self._w
        if w is None or w.cfg is not self.config:
            w = self._warm()
        g = self.guide
        f = w.fill
        # the hit of _fill_warm inlined (one Python call less on the per-token path)
        if (
            f is not None
            and buf.dtype is _I32
            and buf.shape == g._row_shape
            and (g._filler is not None or f[3] == g.cache.epoch)
            and g.cache.enabled
        ):
            buf[...] = f[0]
            return f[1]
        return g._fill_warm(w, buf, True)[0]

    def allocate_bitmask(self) -> np.ndarray:
        return np.zeros(self.guide.n_words, dtype=np.int32)

    def allowed_token_ids(self) -> np.ndarray:
        ids, eos, _ = self.guide.allowed_ids(self.config)
        if eos:  # allowed_ids leaves EOS out; keep the ids sorted
            e = self.guide.eos_id
            ids = np.insert(ids, int(np.searchsorted(ids, e)), e)
        return ids.astype(np.int32, copy=False)

    # -- advancing ------------------------------------------------------------------------
    def accept_token(self, token_id: int) -> None:
        """Advance by one token; raises :class:`TokenRejected` if the mask excludes it."""
        g = self.guide
        if self.terminated:
            raise TokenRejected(f"token {token_id} after end of sentence")
        if token_id == g.eos_id:
            if not g.runtime.eos_allowed(self.config):
                raise TokenRejected("EOS is not allowed: the output is not a complete sentence")
            self._history.append(self.config)
            self.tokens.append(token_id)
            self.terminated = True
            return
        nxt = g._step(self._warm(), token_id)
        if nxt is None:
            if token_id in g.special or not 0 <= token_id < len(g.token_bytes):
                raise TokenRejected(f"token {token_id} is special or out of range")
            spelling = g.token_bytes[token_id]
            raise TokenRejected(f"token {token_id} ({spelling!r}) leaves the language")
        self._history.append(self.config)
        self.config = nxt.cfg
        self._w = nxt
        self.tokens.append(token_id)

    def cost_after(self, token_id: int, reserve: ReserveTable) -> int | None:
        """``reserve.cost`` of the configuration non-EOS ``token_id`` leads to, without
        advancing (None: the token leaves the language).

        Why: the decode loop checks the termination reserve for every sampled token; an
        accept, a reserve memo hit (a Configuration hash, a lock, an LRU move: 17 µs) and a
        rollback cost ~25 µs a step next to a model; this is 3.5 µs: the warm record's step
        and the cost kept on the record of the configuration reached
        (``bench/e2e_steps.py`` at b255895 and 6a861a3)."""
        g = self.guide
        if self.terminated or token_id == g.eos_id:
            return None
        nxt = g._step(self._warm(), token_id)
        if nxt is None:
            return None
        c = nxt.cost
        if c is None or c[0] is not reserve:
            c = nxt.cost = (reserve, reserve.cost(nxt.cfg))
        return c[1]

    def accept_tokens(self, token_ids: Sequence[int]) -> None:
        for t in token_ids:
            self.accept_token(t)

    def rollback(self, n_tokens: int = 1) -> None:
        """Undo the last ``n_tokens`` accepted tokens (EOS included)."""
        if n_tokens < 0 or n_tokens > len(self._history):
            raise ValueError(f"cannot roll back {n_tokens} tokens (have {len(self._history)})")
        if n_tokens:
            self.config = self._history[-n_tokens]
            del self._history[-n_tokens:]
            del self.tokens[-n_tokens:]
            self.terminated = False

    def is_accepting(self) -> bool:
        """Whether the output so far is a complete sentence (EOS legal now)."""
        return not self.terminated and self.guide.runtime.eos_allowed(self.config)

    def is_terminated(self) -> bool:
        return self.terminated

    def forced_tokens(self, limit: int = MAX_FORCED) -> list[int]:
        """The jump-forward span: tokens forced one after another (singleton masks)."""
        out: list[int] = []
        if self.terminated:
            return out
        g = self.guide
        # Through the fill memo, not allowed_ids: the warm records make the common no-span
        # case (and the decoder's fill that follows it) a lookup, not a fresh CD resolution.
        buf = self._scratch
        if buf is None:
            buf = self._scratch = self.allocate_bitmask()
        rec = self._warm()
        while len(out) < limit:
            n, row = g._warm_row(rec, buf)  # the recorded row itself when valid: no copy
            if n != 1:
                break
            words = row.view(np.uint32)
            w = int(np.flatnonzero(words)[0])
            t = w * 32 + int(words[w]).bit_length() - 1
            if t == g.eos_id:
                break
            nxt = g._step(rec, t)
            if nxt is None:  # cannot happen for an exact mask
                raise MaskError(f"forced token {t} rejected by the parser")
            out.append(t)
            rec = nxt
        return out

    @property
    def config_hash(self) -> int:
        return self.config.config_hash

    def text(self) -> bytes:
        tb = self.guide.token_bytes
        return b"".join(tb[t] for t in self.tokens if t != self.guide.eos_id)

    def __repr__(self) -> str:
        return f"Matcher(tokens={len(self.tokens)}, terminated={self.terminated})"
