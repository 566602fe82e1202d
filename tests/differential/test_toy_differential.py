"""Fast parser ≡ executable spec on a toy CRUD grammar: prefixes, mutations, random strings."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_sql.grammar import Grammar, RoleProjection, SchemaLexicon

from ..grammar.toy_grammars import CRUD
from .harness import Differential, mutations

SENTENCES = [
    b"select * from t",
    b"SELECT a, b FROM employees e WHERE a <= 10 AND b = 'x''y' OR c < 1e-3;",
    b"select count(*) from orders -- all\n",
    b'select "Odd (name)" from "Odd (name)" x where (a=1)',
    b"insert into orders values (1, 'a', 2.5e3)",
    b"delete from t where a = 1",
    b"drop table employees;",
    b"select a from count where count = 1",
    b"select\ta\nfrom\tt\twhere a<=b",
]
ALPHABET = b"selctfromwhandx*(),;'\"=<-1e. \n"


def _grammars() -> dict[str, Grammar]:
    base = Grammar.from_lark(CRUD, name="crud")
    lex = SchemaLexicon(
        {
            "TABLE_NAME": [b"employees", b"orders", b"t", b'"Odd (name)"', b"count"],
            "COLUMN_NAME": [b"a", b"b", b"c", b"count", b'"Odd (name)"'],
        },
        fold_bare_case=True,
    )
    return {
        "l1": base,
        "select_only": base.project(RoleProjection.select_only()),
        "lexicon": base.with_lexicon(lex),
        "select_only+lexicon": base.project(RoleProjection.select_only()).with_lexicon(lex),
    }


GRAMMARS = _grammars()


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_every_prefix_and_mutation_agrees(name: str) -> None:
    d = Differential(GRAMMARS[name])
    rng = random.Random(2026)
    accepted = 0
    for s in SENTENCES:
        for i in range(len(s) + 1):
            d.check(s[:i])
        accepted += d.check(s)[1]
        for m in mutations(s, rng, 60, ALPHABET):
            d.check(m)
    assert accepted >= 3  # positive controls: the corpus is not vacuous for any grammar
    assert d.checked > 800


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_chunked_feeding_agrees(name: str) -> None:
    d = Differential(GRAMMARS[name])
    rng = random.Random(7)
    for s in SENTENCES:
        cuts = sorted(rng.sample(range(1, len(s)), k=min(6, len(s) - 1)))
        chunks = [s[a:b] for a, b in zip([0, *cuts], [*cuts, len(s)], strict=True)]
        d.check_incremental(chunks)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                b"select",
                b" ",
                b"*",
                b"from",
                b"t",
                b"a",
                b",",
                b"where",
                b"=",
                b"<",
                b"<=",
                b"1",
                b"e",
                b"'",
                b"x",
                b"(",
                b")",
                b";",
                b"--",
                b"\n",
                b"count",
                b'"',
                b"delete",
                b"and",
            ]
        ),
        max_size=14,
    )
)
def test_random_fragment_strings_agree(parts: list[bytes]) -> None:
    w = b"".join(parts)
    for g in GRAMMARS.values():
        d = _DIFFS.setdefault(g.fingerprint, Differential(g))
        d.check(w)


_DIFFS: dict[str, Differential] = {}
