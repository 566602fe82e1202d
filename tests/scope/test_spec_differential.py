"""Fast path == executable spec with scope-aware lexicons (sampled).

The spec (``spec/oracle.py`` ``ScopeSpec``) evaluates the scope rule on the parse forest of
its own LALR stack, built by lark's tables and a ten-line shift/reduce loop; the fast path
synthesizes semantic values on hash-consed stack nodes. They must agree on viability, EOS
and allowed terminals for every prefix of sampled Spider gold queries and for mutations that
swap a column for another column of the schema (the failure the rule targets).
"""

from __future__ import annotations

import random
import re

import pytest

from ..differential.harness import Differential, mutations
from .helpers import scoped, snapshot, spider_dev

DBS = ("concert_singer", "pets_1", "car_1", "world_1")
EXTRA = [
    "SELECT * FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.concert_ID "
    "WHERE T2.Theme = 'x' AND EXISTS (SELECT 1 FROM singer_in_concert AS T WHERE T.Singer_ID = "
    "T1.Singer_ID) ORDER BY T1.Age",
    "SELECT d.n FROM (SELECT Name AS n FROM singer) AS d WHERE d.n = 'x'",
    "SELECT Name AS Theme FROM singer WHERE Theme = 'x' UNION SELECT Theme FROM concert ORDER BY 1",
    "SELECT * FROM singer WHERE main.singer.Age > 1 AND singer.Age < 9",
    # select-list obligations (bound, unbound, correlated, q.*, quoted, nested)
    "SELECT T2.Name , T1.Theme FROM concert AS T1 JOIN singer AS T2 ON T1.concert_ID = "
    "T2.Singer_ID WHERE T2.Age > 1",
    "SELECT T3.Name , Theme FROM singer AS T1 WHERE T1.Age > 3 ORDER BY Theme",
    'SELECT Name , "Theme" , rowid FROM concert , singer GROUP BY Name',
    "SELECT T2.* , (SELECT T1.Name FROM stadium) FROM singer AS T1 , concert AS T2",
    "SELECT Age FROM singer AS T1 WHERE Age > (SELECT avg(T1.Age) FROM concert WHERE "
    "T1.Age > 1) UNION SELECT Capacity FROM concert",
    "SELECT " + " , ".join(f"T{i}.Name" for i in range(1, 34)) + " FROM singer AS T1 WHERE 1",
    "SELECT " + " , ".join(f"T{i}.Name" for i in range(1, 33)) + " FROM singer AS T1 WHERE 1",
    # the `.` after a name no reference can continue (blocked), and where it stays open
    "SELECT Name FROM singer AS T1 WHERE T1.Age . Name = 1 AND Age . Name = 2",
    'SELECT Age FROM singer ORDER BY "Book" . Age',
    "SELECT T1.Age . Name , Age . Name FROM singer AS T1 WHERE T9 . Age = main.singer.Age",
    # words that can only qualify: the names a qualifier may be, any case and quoting
    'SELECT * FROM singer AS T1 WHERE "t1".Age = [T1].Age AND `T1`.Age = singer.Age',
    'SELECT * FROM singer AS T1 WHERE Age = "2005-11-12" . Age OR Total_spent = 1',
    "SELECT Age FROM singer AS s ORDER BY Tx , s.Age , singer_in_concert.Age",
    'SELECT Age AS x , Name AS "T 1" FROM singer ORDER BY x , "t 1" DESC , X , nosuch',
    "SELECT Age AS x FROM singer AS s ORDER BY s DESC , s , s.Age",
    "SELECT Age AS s FROM singer AS s ORDER BY s DESC",
    # fresh aliases: a name the FROM exposes (alias, else table name) is refused, any case
    'SELECT * FROM singer AS T1 JOIN concert AS t1 JOIN stadium "T1" , concert AS T1x',
    "SELECT * FROM singer JOIN concert singer , stadium AS s JOIN concert AS singer",
    "SELECT * FROM singer AS T1 WHERE EXISTS (SELECT 1 FROM concert AS T1 JOIN stadium T1)",
    "SELECT * FROM (SELECT 1) AS d JOIN singer AS d , singer_in_concert AS T2 JOIN concert T2",
]


def _column_swaps(q: str, cols: list[str], rng: random.Random, n: int) -> list[bytes]:
    spots = [m for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", q)]
    out = []
    for _ in range(n):
        m = rng.choice(spots)
        out.append((q[: m.start()] + rng.choice(cols) + q[m.end() :]).encode())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("bind", [True, False], ids=["obligations", "no-obligations"])
def test_fast_equals_spec_with_scopes(bind: bool) -> None:
    rng = random.Random(2026)
    checked = 0
    for db in DBS:
        d = Differential(scoped(db, bind))
        cols = sorted({c for _, t in snapshot(db).iter_tables() for c in t.column_names})
        qs = [q for g, q in spider_dev() if g == db]
        sample = rng.sample(qs, 2) + (EXTRA if db == "concert_singer" else [])
        for q in sample:
            w = q.encode()
            for i in range(0, len(w) + 1, 3):
                d.check(w[:i])
            d.check(w)
            for m in _column_swaps(q, cols, rng, 12):
                d.check(m)
                d.check(m[: rng.randrange(len(m) + 1)])
            for m in mutations(w, rng, 6, b" .,()=T1aZ_"):
                d.check(m)
        checked += d.checked
    assert checked > 500
