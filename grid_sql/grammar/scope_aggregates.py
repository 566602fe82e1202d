"""The aggregate side of the scope rule (``docs/scope.md``, "Aggregates where they run").

Every engine refuses an aggregate call in a ``WHERE``, a join's ``ON``, ``GROUP BY``,
``LIMIT``/``OFFSET``/``FETCH`` or a ``FILTER`` clause of the query level it belongs to: it
is evaluated per group, and those clauses run before groups exist (or per row). Which clause
a position is in is decided by the keywords still open on the parser stack, so the called
name (``FUNCTION_NAME``) there can be held to the non-aggregate functions exactly, left to
right: the mask takes out only continuations no engine runs. A nested query opens a level of
its own (``WHERE x > (SELECT AVG(y) ...)`` stays writable), and its clauses are held only
when every enclosing level's position is held too: an aggregate whose arguments name only
an outer query's columns is that query's (``HAVING EXISTS (SELECT 1 FROM c WHERE c.n <
SUM(o.total))`` is valid), so inside a subquery of a select list or HAVING it may stand
anywhere.

A second, opt-in part narrows instead (``ScopeTable(nested_aggregates=False)``): inside an
aggregate call's arguments no aggregate may be called. ``SUM(COUNT(x))`` is an error unless
the outer call is a window (``SUM(COUNT(x)) OVER ()``), which is decided only after its
``)``, so the first round keeps the language whole and the checker refuses the unwindowed
form; the Asker's repair round after that refusal generates under the narrowing, so the
model cannot write the same nesting again (``ask/asker.py``).

How: the scope context (``grammar/scope.py`` :class:`Context`) carries two depth tags:
``noagg`` = n when the query levels 1..n are all inside such a clause (set by a clause
keyword at level n when levels 1..n-1 are), and ``inagg`` (the narrowing), the level at
which an aggregate's name was pushed. A tag applies only when it equals the current depth,
so a nested query's positions are free unless its own clause holds them, and the tags
vanish with the stack nodes that set them (a reduced clause). A ``)`` that closes a call's
arguments clears ``inagg`` for what follows it (that call's ``FILTER``/``OVER``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .scope_table import ScopeTable, norm_name

if TYPE_CHECKING:
    from .ir import Grammar
    from .scope import Context

AGG_CALL = ("g",)  # the value of a ``func_name`` naming an aggregate (the narrowing only)
# keywords opening a clause in which a query level's aggregates cannot run
NOAGG_KEYWORDS = ("WHERE", "ON", "GROUP", "LIMIT", "OFFSET", "FETCH")


class AggregateRule:
    """The rule compiled against one grammar's symbol ids (off: :attr:`on` is False)."""

    def __init__(self, grammar: Grammar, table: ScopeTable, sym_base: int) -> None:
        tids = grammar.terminal_ids
        nts = grammar.tables.nonterminal_ids
        lex = grammar.lexicon
        fn = None if lex is None else lex.categories.get("FUNCTION_NAME")
        # only where called names have a lexicon to hold (role grammars)
        self.names: frozenset[str] = table.aggregates if fn is not None else frozenset()
        self.on = bool(self.names) and "FUNCTION_NAME" in tids
        self.fn_tid = tids.get("FUNCTION_NAME", -1)
        self.nested = table.nested_aggregates  # False: the repair round's narrowing
        self.keywords = frozenset(tids[k] for k in NOAGG_KEYWORDS if k in tids)
        self.t_on, self.t_distinct = tids.get("ON", -1), tids.get("DISTINCT", -1)
        self.t_rpar, self.t_lpar = tids.get("RPAR", -1), tids.get("LPAR", -1)
        self.n_func_name = sym_base + nts["func_name"] if "func_name" in nts else -1
        self.n_func_args = sym_base + nts["func_args"] if "func_args" in nts else -1

    def func_value(self, children: list[Any]) -> Any:
        """The value of a reduced ``func_name``: :data:`AGG_CALL` for an aggregate's name
        (the narrowing only; otherwise names are dropped like any merge)."""
        v = children[0] if len(children) == 1 else None
        if not self.nested and isinstance(v, bytes) and norm_name(v) in self.names:
            return AGG_CALL
        return None

    def step(
        self, before: Context, out: Context, symbol: int, value: Any, parent_symbol: int
    ) -> Context:
        """``out`` (the context ``ScopeRules.step`` gave the node pushing ``symbol`` over a
        node with ``before``) with the depth tags carried over and updated."""
        noagg, inagg = before.noagg, before.inagg
        depth = len(out.levels)
        if depth:
            if (
                symbol in self.keywords
                and noagg >= depth - 1  # every enclosing level is in such a clause too
                and not (symbol == self.t_on and parent_symbol == self.t_distinct)
            ):
                noagg = depth
            elif symbol == self.n_func_name and value is AGG_CALL:
                inagg = depth
            elif (
                inagg
                and symbol == self.t_rpar
                and parent_symbol
                in (
                    self.n_func_args,
                    self.t_lpar,
                )
            ):
                inagg = 0
        if noagg == out.noagg and inagg == out.inagg:
            return out
        return replace(out, noagg=noagg, inagg=inagg)

    def banned(self, ctx: Context) -> bool:
        """No aggregate may be called at a position with context ``ctx``."""
        depth = len(ctx.levels)
        return bool(depth) and (ctx.noagg == depth or ctx.inagg == depth)
