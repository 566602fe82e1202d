"""Random statements generated from a *dialect* grammar (L1), with the names of the bypass
schema (``bypass_attempts.py``), denied ones included, in every identifier and argument
position (issue 23 §4: "Grammar ⊆ checker, tested").

A derivation starts at ``select_stmt`` and picks productions uniformly at random; past a depth
it takes a shortest production, so every walk ends. Identifier terminals draw from small pools
of table, column, alias and function names (allowed and denied, and functions off the
allow-list), literals from a few values. Parameters and comments are never produced. The
result is a sentence of the dialect grammar written with spaces between lexemes.
"""

from __future__ import annotations

import random
import re

from grid_sql.grammar import Grammar

TABLES = ["customer", "orders", "employee"]
COLUMNS = ["id", "name", "email", "card", "total", "salary", "customer_id"]
ALIASES = ["c", "o", "e", "c", "e", "customer", "employee", "email", "x"]
FUNCTIONS = [
    "count",
    "max",
    "upper",
    "coalesce",
    "length",
    "lower",
    "md5",
    "to_json",
    "row_to_json",
    "table_to_xml",
    "query_to_xml",
    "current_setting",
    "version",
    "sleep",
    "load_file",
    "database",
    "string_agg",
    "json_agg",
    "group_concat",
    "readfile",
]
_FIXED = {
    "NUMBER": ["1", "2", "0"],
    "STRING": ["'1'", "'1'", "'zq%'", "'a'", "'customer'", "'select email from customer'"],
    "TABLE_NAME": TABLES,
    "INSERT_TABLE_NAME": TABLES,
    "UPDATE_TABLE_NAME": TABLES,
    "DELETE_TABLE_NAME": TABLES,
    "TRUNCATE_TABLE_NAME": TABLES,
    "COLUMN_NAME": COLUMNS,
    "FUNCTION_NAME": FUNCTIONS,
    "IDENT": ALIASES + COLUMNS,
}
_NEVER = {"PARAM", "LINE_COMMENT", "BLOCK_COMMENT", "WS"}
_FALLBACK = ["1", "'a'", "x", "=", "+", "x'41'", "b'1'", "0x1", "->", "->>", "#>", "@>"]


class SentenceGenerator:
    """Random sentences of one dialect grammar from one start symbol."""

    def __init__(self, dialect: str, schema: str, start: str = "select_stmt") -> None:
        self.g = Grammar.dialect(dialect)
        self.start = start
        self.pools = dict(_FIXED)
        self.pools["SCHEMA_NAME"] = [schema]
        self.rules: dict[str, list[tuple[str, ...]]] = {}
        for r in self.g.rules:
            self.rules.setdefault(r.lhs, []).append(r.rhs)
        self.samples: dict[str, list[str] | None] = {}
        for t in self.g.terminals:
            self.samples[t.name] = self._terminal_samples(t.name, t.pattern, t.is_string)
        self.height = self._heights()

    def _terminal_samples(self, name: str, pattern: str, is_string: bool) -> list[str] | None:
        if name in _NEVER:
            return None
        if name in self.pools:
            return self.pools[name]
        if is_string:
            m = re.fullmatch(r"\(\?i:(.*)\)", pattern)
            text = m.group(1) if m else pattern
            return [re.sub(r"\\(.)", r"\1", text)]
        ok = [s for s in _FALLBACK if re.fullmatch(pattern, s)]
        return ok[:1] or None

    def _heights(self) -> dict[str, float]:
        """Shortest derivation height per symbol (inf: derives nothing producible)."""
        inf = float("inf")
        h: dict[str, float] = {t: (0 if s else inf) for t, s in self.samples.items()}
        for nt in self.rules:
            h[nt] = inf
        changed = True
        while changed:
            changed = False
            for nt, alts in self.rules.items():
                best = min(1 + max((h.get(s, inf) for s in rhs), default=0) for rhs in alts)
                if best < h[nt]:
                    h[nt] = best
                    changed = True
        return h

    def sentence(self, rng: random.Random, max_depth: int = 9) -> str:
        out: list[str] = []
        self._expand(self.start, 0, max_depth, rng, out)
        # an empty ARRAY[] has no type on PostgreSQL: give it an element, so more sentences run
        return " ".join(out).replace("array [ ]", "array [ 1 ]")

    def _expand(
        self, sym: str, depth: int, max_depth: int, rng: random.Random, out: list[str]
    ) -> None:
        samples = self.samples.get(sym)
        if sym not in self.rules:
            assert samples, sym
            out.append(rng.choice(samples))
            return
        alts = [a for a in self.rules[sym] if all(self.height[s] < float("inf") for s in a)]
        if depth >= max_depth:
            least = min(max((self.height[s] for s in a), default=0) for a in alts)
            alts = [a for a in alts if max((self.height[s] for s in a), default=0) == least]
        for s in rng.choice(alts):
            self._expand(s, depth + 1, max_depth, rng, out)


_FRAMES = [
    "SELECT {e} FROM customer c",
    "SELECT name FROM customer c WHERE {e}",
    "SELECT {e} FROM employee e",
    "SELECT {e} FROM orders o JOIN customer c ON c.id = o.customer_id",
    "SELECT count(*) FROM orders o GROUP BY {e}",
    "SELECT total FROM orders o ORDER BY {e}",
]


def generated(dialect: str, schema: str, n: int, seed: int = 0) -> list[str]:
    """``n`` sentences: a third whole queries (from ``select_stmt`` and ``select_core``, at
    depths 4-7), two thirds grammar-generated expressions (``expr``, depths 3-6) placed in
    simple query frames, so that more of them resolve and run."""
    out: list[str] = []
    whole = n // 3
    for k, start in enumerate(("select_stmt", "select_core")):
        gen = SentenceGenerator(dialect, schema, start)
        rng = random.Random(seed * 3 + k)
        out += [gen.sentence(rng, 4 + i % 4) for i in range(whole // 2)]
    gen = SentenceGenerator(dialect, schema, "expr")
    rng = random.Random(seed * 3 + 2)
    while len(out) < n:
        frame = _FRAMES[len(out) % len(_FRAMES)]
        out.append(frame.format(e=gen.sentence(rng, 3 + len(out) % 4)))
    return out


def run_generated(asker: object, sentences: list[str]) -> tuple[int, int, list[str]]:
    """Each sentence through ``asker.run_sql``: (passed the checker, ran, leaking sentences).
    A statement the checker passes may still fail on the server (a random sentence is rarely
    meaningful); one that runs must return no denied value."""
    from grid_sql.errors import PolicyViolation
    from tests.policy.bypass_attempts import leaked

    passed = ran = 0
    leaks: list[str] = []
    for sql in sentences:
        try:
            res = asker.run_sql(sql, timeout_s=5)  # type: ignore[attr-defined]
        except PolicyViolation:
            continue
        except Exception:  # noqa: BLE001 - the server refused a checked statement
            passed += 1
            continue
        passed += 1
        ran += 1
        if leaked(res.rows):
            leaks.append(sql)
    return passed, ran, leaks
