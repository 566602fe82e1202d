"""Walk arm (small): random walks through the exact masks never dead-end and stay in L.

Tokens are sampled uniformly among the allowed ids (EOS taken with probability 1/2 when
legal). Every step must have a non-empty mask (an empty one raises MaskError), every sampled
token must be accepted, every walk's output must be a viable prefix according to the
independent spec, and every walk that stopped on EOS must be a sentence of L (spec and
lark-table parse). The issue's 10,000-walk arm needs the Rust hot path; this is its
Python-path smoke version.
"""

from __future__ import annotations

import random

import pytest

from grid_sql.grammar import Grammar, RoleProjection, SchemaLexicon
from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide
from grid_sql.spec.oracle import SpecOracle

from .helpers import vocab

LEX = SchemaLexicon(
    {
        "TABLE_NAME": [b"Artist", b"Album", b'"Track"'],
        "COLUMN_NAME": [b"Name", b"ArtistId", b"Title"],
        "SCHEMA_NAME": [b"main"],
    },
    fold_bare_case=True,
)


@pytest.mark.parametrize("seed", range(4))
def test_random_walks_sound_and_dead_end_free(seed: int) -> None:
    g = (
        Grammar.dialect("sqlite")
        .project(
            RoleProjection(
                keep_statements=frozenset({"select_stmt"}),
                drop=frozenset({"cte_ref", "table_function"}),
            )
        )
        .with_lexicon(LEX)
    )
    v = vocab("llama-spm")
    guide = Guide(g, v, cache=MaskCache())
    spec = SpecOracle(g.to_spec())
    rng = random.Random(seed)
    ended = 0  # walks that stopped on EOS (each checked as a sentence below)
    for _ in range(3):
        m = guide.matcher()
        for _ in range(30):
            ids = m.allowed_token_ids().tolist()
            assert ids, "empty mask"
            if v.eos_token_id in ids and rng.random() < 0.5:
                m.accept_token(v.eos_token_id)
                break
            choices = [i for i in ids if i != v.eos_token_id]
            m.accept_token(rng.choice(choices))
        text = m.text()
        assert spec.is_viable_prefix(text), text
        if m.is_terminated():
            ended += 1
            assert spec.accepts(text), text
