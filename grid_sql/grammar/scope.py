"""Scope-aware identifier lexicons: which columns a position can name (issue #8 §2).

The L3 lexicon of ``COLUMN_NAME`` is one list for the whole statement: the union of every
readable column. Once a query's FROM clause is known, a column position can only name a
column of a table *in scope*, and ``T2.`` only a column of the table bound to ``T2``. That
rule is context sensitive (the binding is made by earlier lexemes), so it is not a grammar
change: it is a side state carried with the parser configuration. This module holds the
pieces that are pure functions of the grammar and the schema, independent of the parser:

* :class:`ScopeTable` -- the schema side (table -> columns, schema names), fingerprinted;
* :class:`ScopeRules` -- the grammar side: which terminals carry their lexeme as a semantic
  value, and how a reduction synthesizes the value of its left-hand side from its children
  (:meth:`ScopeRules.reduce`), plus how the *scope context* of a stack node follows from its
  parent's (:meth:`ScopeRules.step`) and which column names a context admits
  (:meth:`ScopeRules.restriction`).

Soundness is the bar (a statement that names its columns correctly is never blocked), so
every case the rule cannot decide from the schema answers "unrestricted": a SELECT list
before its FROM (paper Proposition 11), an unbound qualifier, a derived table, a table
function, a CTE, a table renamed with a column list, a table the schema does not know.
``docs/scope.md`` states the rule and why it is sound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LexiconError
from .aliases import ALIAS_CLAUSES, ALIAS_STOPS
from .scope_aggregates import AggregateRule
from .scope_table import (  # noqa: F401 - re-exported: grammar.scope is their public home
    DEFAULT_SCHEMAS,
    KEYWORD_ARGS,
    MAX_REFS,
    PSEUDO_COLUMNS,
    WILDCARD,
    ScopeTable,
    norm_name,
)
from .scope_values import (  # noqa: F401 - re-exported: grammar.scope is their public home
    EMPTY_BAG,
    Bag,
    Item,
    Ref,
    from_item_value,
    merge_refs,
)

if TYPE_CHECKING:
    from .ir import Grammar

# Table categories, the rule a name of theirs completes, and its schema qualifier's rule
# (``docs/scope.md``, "Table names by schema"); the qualifiers carry their lexeme.
TABLE_TARGETS = (
    ("TABLE_NAME", "table_name", "schema_qualifier"),
    ("INSERT_TABLE_NAME", "insert_target", "insert_qualifier"),
    ("UPDATE_TABLE_NAME", "update_target", "update_qualifier"),
    ("DELETE_TABLE_NAME", "delete_target", "delete_qualifier"),
    ("TRUNCATE_TABLE_NAME", "truncate_target", "truncate_qualifier"),
)
QUALIFIER_RULES = frozenset(q for _, _, q in TABLE_TARGETS)

# Context.rec: the innermost WITH clause being written is RECURSIVE (1), right after a `,` of
# its CTE list (2), after a CTE's name (REC_NAME), the `(` of its column list (REC_LPAR), the
# list (REC_LISTED), and inside the CTE's body REC_BODY + 2 * (query levels outside the body)
# + (1 if the CTE has a column list).
REC_NAME, REC_LPAR, REC_LISTED, REC_BODY = 3, 4, 5, 6

# Level states of a query level (one per SELECT on the stack).
NONE, OPEN, DONE, QB = 0, 1, 2, 3
# NONE: before FROM (select list); OPEN: inside FROM (items so far complete);
# DONE: after FROM; QB: a finished query body whose ORDER BY / LIMIT follow.


@dataclass(frozen=True, slots=True)
class Level:
    """One query level of the scope context (``refs``: its select list's references)."""

    state: int
    items: tuple[Item, ...] = ()
    aliases: tuple[str, ...] = ()
    refs: tuple[Ref, ...] | None = ()


@dataclass(frozen=True, slots=True)
class Context:
    """The scope context of a stack node: the query levels (outermost first) and the CTE
    names visible (None: none; WILDCARD in the tuple: unknown, inside a WITH clause).

    ``bound``: the CTE names (as written) a FROM item may reference here (``cte_names``): those
    of every WITH clause enclosing the node, and inside a WITH clause being written the
    CTEs it has completed so far, plus the one being written when the clause is
    ``RECURSIVE``; ``rec``: 0 unless the innermost WITH clause being written is ``RECURSIVE``,
    else where in it the node is (``REC_NAME`` and the constants beside it);
    ``cte_outs``: the output aliases of the CTEs in ``bound`` (columns they define), and
    inside a recursive CTE's body the columns it defines itself (its column list, or after
    its anchor member the anchor's output aliases)."""

    levels: tuple[Level, ...] = ()
    ctes: tuple[str, ...] = ()
    bound: tuple[bytes, ...] = ()
    rec: int = 0
    cte_outs: tuple[str, ...] = ()
    noagg: int = 0  # depth tags of grammar/scope_aggregates.py (0: none)
    inagg: int = 0


ROOT_CONTEXT = Context()


@dataclass(frozen=True, slots=True)
class Restriction:
    """What a position admits: ``names`` (normalized column names) for COLUMN_NAME, or
    None for unrestricted; ``qualified`` when the position follows ``q.`` with ``q`` no schema
    (bound to known tables, or in a select list before its FROM): then no other identifier
    terminal can follow (no three-part name);
    ``dead`` when ``q`` is bound nowhere and no schema, so no continuation of ``q.`` is a
    valid reference (then the ``.`` itself is blocked where the name has another way on:
    ``ParserRuntime.allowed_mask``)."""

    names: frozenset[str] | None
    qualified: bool = False
    dead: bool = False


UNRESTRICTED = Restriction(None)


def unbindable_qualifiers(grammar: Grammar, table: ScopeTable) -> frozenset[str]:
    """Names a select-list qualifier ``q.`` can never be bound to under the hijack rule: no
    alias may spell them (``table.alias_refuse``), and they are no table the grammar lets a
    FROM name (its ``TABLE_NAME`` lexicon, else the scope table) nor a schema. A reference
    through one is no obligation (an obligation there could never be met: the FROM could
    never close, a dead end); the checker refuses the reference instead."""
    if not table.alias_refuse:
        return frozenset()
    lex = grammar.lexicon
    words = lex.categories.get("TABLE_NAME") if lex is not None else None
    tables = (
        frozenset(norm_name(w) for w in words.words)
        if words is not None
        else frozenset(table.columns)
    )
    return frozenset(table.alias_refuse - tables - table.schemas)


class ScopeRules:
    """The grammar side of the scope rule, compiled against one grammar's symbol ids.

    ``sym_base`` is the id offset of nonterminals in stack-node symbols (the parser pushes
    terminal ids as themselves and nonterminal ``n`` as ``sym_base + n``).
    """

    def __init__(self, grammar: Grammar, table: ScopeTable, sym_base: int) -> None:
        self.table = table
        self.unbindable = unbindable_qualifiers(grammar, table)
        tids = grammar.terminal_ids
        nts = grammar.tables.nonterminal_ids
        self.sym_base = sym_base
        if "COLUMN_NAME" not in tids:
            raise LexiconError("scope-aware lexicons need a COLUMN_NAME terminal")
        self.column_tid = tids["COLUMN_NAME"]
        # identifier terminals keep their lexeme: they name tables, aliases, qualifiers
        self.valued: frozenset[int] = frozenset(
            t.id for t in grammar.terminals if t.category or t.name == "IDENT"
        )
        # the same as a sorted tuple: what a mask entry's memo of its classes is tagged with
        # (a tuple of ints, which the cyclic garbage collector stops tracking)
        self.valued_key: tuple[int, ...] = tuple(sorted(self.valued))
        # terminals no three-part name can start with after a bound `q.`
        self.blocked_after_qualifier: frozenset[int] = frozenset(
            t.id
            for t in grammar.terminals
            if (t.category or t.name == "IDENT") and t.name != "COLUMN_NAME"
        )

        def t(name: str) -> int:
            return tids.get(name, -1)

        def n(name: str) -> int:
            return sym_base + nts[name] if name in nts else -1

        # identifier terminals that, where a word of theirs can only be a qualifier (or, at
        # a sort key, an output alias), admit only the names it may be there (see
        # ``qualifier_names``, ``output_aliases``); other category terminals never start an
        # expression (FUNCTION_NAME may start a call: never restricted this way)
        self.qualifier_terms: tuple[int, ...] = tuple(
            tids[x] for x in ("TABLE_NAME", "IDENT") if x in tids
        )

        self.t_select, self.t_from, self.t_dot, self.t_with = (
            t("SELECT"),
            t("FROM"),
            t("DOT"),
            t("WITH"),
        )
        # UPDATE/DELETE bind their target where a nested SELECT can correlate to it (and PG's
        # UPDATE ... FROM, MySQL's multi-table forms): the rule does not model those
        # bindings, so the keyword opens a level whose binding is unknown (like a select
        # list before its FROM) and every position nested in the statement is unrestricted.
        self.t_dml = frozenset(x for x in (t("UPDATE"), t("DELETE")) if x >= 0)
        # fresh aliases (ScopeTable.fresh_aliases): where an IDENT can only be a table's alias
        self.fresh = (
            (table.fresh_aliases or bool(table.alias_refuse))
            and "IDENT" in tids
            and "table_alias" in nts
        )
        self.fresh_exposed = table.fresh_aliases  # refuse the names the FROM exposes too
        self.alias_refuse = table.alias_refuse
        # output aliases (ScopeTable.output_refuse): an IDENT that can only be one
        self.output_refuse = table.output_refuse if "IDENT" in tids else frozenset()
        self.nt_output_alias_of = frozenset(nts[x] for x in ("alias", "alias_name") if x in nts)
        self.fresh = self.fresh or bool(self.output_refuse and self.nt_output_alias_of)
        self.t_ident, self.t_as, self.t_lpar = t("IDENT"), t("AS"), t("LPAR")
        self.nt_table_alias = nts.get("table_alias", -1)
        # CTE names (ScopeTable.cte_names): where a completed CTE, a RECURSIVE clause's CTE
        # name and a cte_ref are read
        self.cte_names = table.cte_names and "cte_ref" in nts
        self.t_recursive, self.t_comma = t("RECURSIVE"), t("COMMA")
        self.nt_cte_ref = nts.get("cte_ref", -1)
        self.n_ident_list = n("ident_list")
        # the `(` opening a CTE's body follows AS or MATERIALIZED; a set operation's anchor
        self.body_openers = frozenset(x for x in (t("AS"), n("cte_materialized")) if x >= 0)
        self.set_ops = frozenset(x for x in (n("set_op"), n("union_op")) if x >= 0)
        # table names by schema (ScopeTable.table_schemas): where a TABLE_NAME completes a
        # table_name (grammar-local ids) and the schema_qualifier node before `s.`
        self.bare_tables = table.bare_tables()
        self.schema_columns = table.schema_columns
        self.default_schema = table.default_schema
        # a bare word at a FROM item's start may also be a schema qualifier (``s.t``)
        self.bare_or_schema = (
            None
            if self.bare_tables is None or table.table_schemas is None
            else self.bare_tables | frozenset(table.table_schemas)
        )
        self.table_schemas = table.table_schemas
        # (category terminal, target, qualifier (grammar-local), qualifier (stack symbol))
        self.table_terms: tuple[tuple[int, int, int, int], ...] = tuple(
            (tids[term], nts[target], nts[qual], n(qual))
            for term, target, qual in TABLE_TARGETS
            if term in tids and target in nts and qual in nts
        )
        self.table_term_of = {tt[0]: tt for tt in self.table_terms}
        self.table_words_memo: dict[Any, Any] = {}  # parser/tables.py, per name set
        self.t_schema = t("SCHEMA_NAME")
        slex = grammar.lexicon.categories.get("SCHEMA_NAME") if grammar.lexicon else None
        self.schema_words = bool(slex is not None and slex.words)  # a qualifier can be spelled
        # typed literals (PostgreSQL ``typed_name STRING``): the head must be a type word of
        # the role's TYPE_NAME lexicon whichever name category it lexed as (parser/tables.py)
        self.t_string = t("STRING")
        self.nt_typed_name = nts.get("typed_name", -1)
        lex = grammar.lexicon
        types = None if lex is None else lex.categories.get("TYPE_NAME")
        self.typed_words: frozenset[str] | None = (
            None
            if types is None or self.nt_typed_name < 0 or self.t_string < 0
            else frozenset(norm_name(w) for w in types.words)
        )
        # output aliases (ScopeTable.alias_clauses): clause keywords and search stops
        self.alias_clause_tids: dict[int, str] = {
            tids[k]: v for k, v in ALIAS_CLAUSES.items() if k in tids and v in table.alias_clauses
        }
        self.alias_other_tids: frozenset[int] = frozenset(
            tids[k]
            for k in ALIAS_CLAUSES
            if k in tids and ALIAS_CLAUSES[k] not in table.alias_clauses
        ) | frozenset(tids[k] for k in ALIAS_STOPS if k in tids)
        self.cte_lists = frozenset(n(x) for x in nts if x == "cte" or x.startswith("__with_clause"))
        self.n_table_name = n("table_name")
        self.n_select_list = n("select_list")
        self.n_from_clause = n("from_clause")
        self.n_any_name = n("any_name")
        self.n_with_clause = n("with_clause")
        self.query_bodies = frozenset(
            n(x) for x in ("select_core", "query_body", "query_term") if x in nts
        )
        self.from_items = frozenset(
            n(x)
            for x in nts
            if x in ("table_primary", "table_ref", "join_clause", "from_list")
            or x.startswith("__from_list")
        )
        # rules whose value is only ever read as the qualifier of a following `.`
        self.qualifier_rules = frozenset(r.id for r in grammar.rules if r.lhs == "any_name")
        # per rule: how its value is synthesized
        self.rule_kind: list[str] = []
        self.rule_rhs: list[tuple[str, ...]] = []
        # select-list obligations (ScopeTable.bind_select_list): FROM clauses are closed by
        # the reduction of this nonterminal (as a grammar-local id, not a stack symbol)
        self.bind = table.bind_select_list
        self.nt_from_clause = nts.get("from_clause", -1)
        # what a name shifted at a sort key or expression start may become (grammar-local)
        self.nt_any_name = nts.get("any_name", -1)
        self.nt_output_alias = nts.get("output_alias", -1)
        # aggregates where they run (grammar/scope_aggregates.py)
        self.aggs = AggregateRule(grammar, table, sym_base)
        for r in grammar.rules:
            rhs = tuple(str(s) for s in r.rhs)
            self.rule_rhs.append(rhs)
            name = r.lhs
            if name == "func_name" and self.aggs.on and not self.aggs.nested:
                kind = "func_name"
            elif name == "column_ref":
                kind = "column_ref"
            elif name == "select_item" and rhs[-2:] == ("DOT", "STAR"):
                kind = "star_ref"
            elif name == "query":
                kind = "reset"
            elif name in ("table_name", "table_alias", "table_primary", "alias", "cte"):
                kind = name
            elif name == "table_function":
                kind = name
            elif name == "ident_list" or name.startswith("__ident_list"):
                kind = "names"
            elif (
                name in ("any_name", "alias_name", "cte_ref", "table_func_name", "free_func_name")
                or name in QUALIFIER_RULES
            ):
                kind = "name"
            else:
                kind = "merge"
            self.rule_kind.append(kind)
        # one-child merges (an expression's chain of unit rules): the value is the child's
        # Bag or None, which ParserRuntime._reduce_valued reads without calling reduce
        self.unit_merge: list[bool] = [
            k == "merge" and len(rhs) == 1
            for k, rhs in zip(self.rule_kind, self.rule_rhs, strict=True)
        ]

    # ------------------------------------------------------------------ values
    def records_refs(self, rule: int) -> bool:
        """Whether rule ``rule`` yields a select-list reference (then :meth:`reduce` needs to
        know whether it is reduced in a select list before its FROM)."""
        return self.bind and self.rule_kind[rule] in ("column_ref", "star_ref")

    def reduce(self, rule: int, children: list[Any], in_select_list: bool = False) -> Any:
        """The value of rule ``rule``'s left-hand side from its children's values.

        ``in_select_list``: the reduction happens in a select list before its FROM (read
        only for the rules of :meth:`records_refs`)."""
        kind = self.rule_kind[rule]
        if kind in ("column_ref", "star_ref"):
            if not (in_select_list and self.bind):
                return None  # no Bag below a column reference: what a merge would give
            ref = self._ref(kind, children)
            return None if ref is None else Bag(refs=(ref,))
        if kind == "merge":
            bags = [c for c in children if isinstance(c, Bag)]
            if not bags:
                return None
            if len(bags) == 1:
                return bags[0]
            return Bag(
                tuple(i for b in bags for i in b.items),
                tuple(a for b in bags for a in b.aliases),
                tuple(c for b in bags for c in b.ctes),
                merge_refs([b.refs for b in bags]),
                tuple(w for b in bags for w in b.cte_words),
                tuple(o for b in bags for o in b.cte_outs),
            )
        rhs = self.rule_rhs[rule]
        if kind == "reset":
            # a query: the output aliases of its body (the columns a derived table or CTE
            # defines; a tuple, not a Bag, so no merge above an expression subquery sees it)
            if not self.cte_names or "query_body" not in rhs:
                return None
            body = children[rhs.index("query_body")]
            if not isinstance(body, Bag) or not body.aliases:
                return None
            return ("o", body.aliases)
        if kind == "name":
            v = children[0] if len(children) == 1 else None
            return v if isinstance(v, bytes) else None
        if kind == "func_name":
            return self.aggs.func_value(children)
        if kind == "alias":
            v = children[-1]
            return Bag(aliases=(norm_name(v) if isinstance(v, bytes) else WILDCARD,))
        return from_item_value(kind, rhs, children, self.cte_names, self.table)

    def _ref(self, kind: str, children: list[Any]) -> Ref | None:
        """The reference a ``column_ref`` / ``q.*`` reduction writes (None: no obligation:
        a three-part name, a bare name some table answers without listing it, a bare
        double-quoted name (SQLite reads an unmatched one as a string), or a bare name no
        table of the schema has, which no FROM item could bind: an obligation there could
        never be met)."""
        if kind == "star_ref":
            q = children[0]
            if not isinstance(q, bytes) or norm_name(q) in self.unbindable:
                return None
            return Ref(norm_name(q), WILDCARD, q)
        if len(children) == 1:
            c = children[0]
            if not isinstance(c, bytes) or c[:1] == b'"':
                return None
            cn = norm_name(c)
            if cn in KEYWORD_ARGS or cn in PSEUDO_COLUMNS or cn not in self.table.all_columns:
                return None
            return Ref(None, cn, c)
        if len(children) == 3:
            q, c = children[0], children[2]
            if (
                isinstance(q, bytes)
                and isinstance(c, bytes)
                and norm_name(q) not in self.unbindable
            ):
                return Ref(norm_name(q), norm_name(c), q)
        return None

    def unbound_refs(self, ctx: Context) -> tuple[Ref, ...]:
        """The select-list references no FROM item binds, read at the node that closes a
        FROM clause (``ctx``: its context, the level just DONE on top); () when every
        reference may bind or the rule cannot decide.

        Decided only when every enclosing level's FROM is complete too (a correlated
        reference binds there; an enclosing select list, derived table, ``ON`` or
        ``ORDER BY`` subquery leaves it open). A bare ``c`` binds when some FROM item of any
        level has ``c`` (or is not a catalog table, or is named ``c``: a whole-row
        reference), or ``c`` is an output alias; ``q.c`` / ``q.*`` when ``q`` names a FROM
        item of any level or is a schema. The column of ``q.c`` is not checked: an
        obligation must always be satisfiable by more FROM items (``, t AS q``), or a
        position would have no completion.
        """
        levels = ctx.levels
        if not self.bind or not levels:
            return ()
        top = levels[-1]
        if top.state != DONE or not top.refs:
            return ()
        if any(lv.state != DONE for lv in levels[:-1]):
            return ()
        items = [i for lv in levels for i in lv.items]
        aliases = {a for lv in levels for a in lv.aliases}
        names = {n for i in items for n in i.names}
        wild = WILDCARD in names  # an item of unknown name binds every qualifier
        have: set[str] = set()
        opaque = False
        for i in items:
            if self._item_opaque(i, ctx.ctes):
                opaque = True
            elif i.table is not None:
                have |= self.item_columns(i)
        schemas = self.table.schemas | {i.schema for i in items if i.schema}
        out: list[Ref] = []
        for r in top.refs:
            if r.qualifier is None:
                if (
                    opaque
                    or WILDCARD in aliases
                    or r.column in aliases
                    or r.column in have
                    or wild
                    or r.column in names
                ):
                    continue
            elif wild or r.qualifier in names or r.qualifier in schemas:
                continue
            out.append(r)
        return tuple(out)

    # ------------------------------------------------------------------ contexts
    def step(self, ctx: Context, symbol: int, value: Any, parent_symbol: int) -> Context:
        """The context of a node pushing ``symbol``/``value`` over a node with ``ctx``."""
        out = self._step(ctx, symbol, value, parent_symbol)
        return self.aggs.step(ctx, out, symbol, value, parent_symbol) if self.aggs.on else out

    def _step(self, ctx: Context, symbol: int, value: Any, parent_symbol: int) -> Context:
        ctes, bound, rec, co = ctx.ctes, ctx.bound, ctx.rec, ctx.cte_outs
        if symbol == self.t_select or symbol in self.t_dml:
            return Context((*ctx.levels, Level(NONE)), ctes, bound, rec, co)
        levels = ctx.levels
        if symbol in self.query_bodies:
            bag = value if isinstance(value, Bag) else EMPTY_BAG
            return Context((*levels, Level(QB, bag.items, bag.aliases)), ctes, bound, rec, co)
        if symbol == self.t_with:
            return Context(levels, (*ctes, WILDCARD), bound, 0, co)
        if symbol == self.n_with_clause:
            bag = value if isinstance(value, Bag) else Bag(ctes=(WILDCARD,))
            return Context(
                levels, (*ctes, *bag.ctes), (*bound, *bag.cte_words), rec, (*co, *bag.cte_outs)
            )
        if self.cte_names:
            if rec == REC_NAME or rec == REC_LPAR:  # after a CTE name of a RECURSIVE clause
                if rec == REC_NAME and symbol == self.t_lpar:
                    return Context(levels, ctes, bound, REC_LPAR, co)
                if rec == REC_LPAR and symbol == self.n_ident_list and isinstance(value, tuple):
                    # its column list: its own body may read these columns
                    return Context(levels, ctes, bound, REC_LISTED, (*co, *value[1]))
                rec = 1
                ctx = Context(levels, ctes, bound, 1, co)
            if (rec == 1 or rec == REC_LISTED) and symbol == self.t_lpar:
                if parent_symbol in self.body_openers:
                    # the CTE's body opens at this depth of query levels (its anchor's)
                    body = REC_BODY + 2 * len(levels) + (rec == REC_LISTED)
                    return Context(levels, ctes, bound, body, co)
            if (
                rec >= REC_BODY
                and symbol in self.set_ops
                and parent_symbol in self.query_bodies
                and not (rec - REC_BODY) & 1
                and len(levels) == (rec - REC_BODY) // 2 + 1
                and levels[-1].state == QB
            ):
                # the anchor of a recursive CTE without a column list is written: the members
                # after it may read its output aliases, the CTE's columns
                outs = tuple(a for a in levels[-1].aliases if a != WILDCARD and a not in co)
                if outs:
                    return Context(levels, ctes, bound, rec, (*co, *outs))
            if symbol == self.t_recursive and parent_symbol == self.t_with:
                return Context(levels, ctes, bound, 1, co)
            if rec and symbol == self.t_comma and parent_symbol in self.cte_lists:
                return Context(levels, ctes, bound, 2, co)
            if symbol in self.cte_lists and isinstance(value, Bag):
                # a CTE of the WITH clause being written is complete: later ones may read it
                return Context(
                    levels, ctes, (*bound, *value.cte_words), rec, (*co, *value.cte_outs)
                )
            if (
                rec
                and symbol == self.t_ident
                and isinstance(value, bytes)
                and (
                    (parent_symbol == self.t_recursive and rec == 1)
                    or (parent_symbol == self.t_comma and rec == 2)
                )
            ):
                # the name of a CTE of a RECURSIVE clause: its own body may read it
                return Context(levels, ctes, (*bound, value), REC_NAME, co)
        if not levels:
            return ctx
        top = levels[-1]
        if symbol == self.n_select_list and top.state == NONE:
            bag = value if isinstance(value, Bag) else EMPTY_BAG
            return Context(
                (*levels[:-1], Level(NONE, (), bag.aliases, bag.refs)), ctes, bound, rec, co
            )
        if parent_symbol == self.n_select_list and top.state == NONE:
            if symbol == self.t_from:
                return Context(
                    (*levels[:-1], Level(OPEN, (), top.aliases, top.refs)), ctes, bound, rec, co
                )
            if symbol == self.n_from_clause:
                bag = value if isinstance(value, Bag) else EMPTY_BAG
                return Context(
                    (*levels[:-1], Level(DONE, bag.items, top.aliases, top.refs)),
                    ctes,
                    bound,
                    rec,
                    co,
                )
        if top.state == OPEN and symbol in self.from_items and isinstance(value, Bag):
            return Context(
                (*levels[:-1], Level(OPEN, top.items + value.items, top.aliases, top.refs)),
                ctes,
                bound,
                rec,
                co,
            )
        return ctx

    def defined_columns(self, ctx: Context) -> frozenset[str]:
        """Column names the statement itself defines and a column position may name beyond
        the role's lexicon (``cte_names``): the output aliases of the CTEs bound in ``ctx``
        and of the derived tables in the FROM items of its levels, less every column name
        of the catalog (so such a word can never resolve to a table's column, a hidden one
        included, whatever the level it is written at) and unknown (``WILDCARD``) names.
        Admitted only where the position already admits the whole column lexicon: a
        superset of what may bind there, never a name of the catalog."""
        if not self.cte_names:
            return frozenset()
        names = set(ctx.cte_outs)
        for lv in ctx.levels:
            for i in lv.items:
                names.update(i.outs)
        names.discard(WILDCARD)
        return frozenset(names - self.table.all_columns)

    def alias_names(self, ctx: Context) -> frozenset[str]:
        """The output aliases of the innermost query level that name no catalog column
        (``alias_clauses``: read where the position is in one of those clauses)."""
        if not ctx.levels:
            return frozenset()
        names = set(ctx.levels[-1].aliases)
        names.discard(WILDCARD)
        return frozenset(names - self.table.all_columns)

    def bound_ctes(self, ctx: Context) -> frozenset[bytes]:
        """The CTE names a FROM item may reference by name in ``ctx`` (``cte_names``), as
        they were written: a reference must spell one byte for byte, so it resolves to the
        CTE in every dialect whatever its case and quoting rules (a case-folded match could
        be a different relation on PostgreSQL: ``"Foo"`` is not ``foo``)."""
        return frozenset(ctx.bound)

    def item_columns(self, item: Item) -> frozenset[str]:
        """The columns of a FROM item's table: of the table in the schema it names (or the
        default schema, for a bare name) when the catalog has several schemas
        (``ScopeTable.table_schemas``), else the union over the tables of that name. Only
        for items that are not opaque (their table is in the catalog)."""
        assert item.table is not None
        sc = self.schema_columns
        if sc is not None:
            got = sc.get((item.schema or self.default_schema or "", item.table))
            if got is not None:
                return got
        return self.table.columns[item.table]

    def _item_opaque(self, item: Item, ctes: tuple[str, ...]) -> bool:
        if item.opaque or item.table is None or item.table not in self.table.columns:
            return True
        return bool(ctes) and (WILDCARD in ctes or item.table in ctes)

    def _unbound(self, levels: tuple[Level, ...], q: str) -> Restriction:
        """After ``q.`` where ``q`` names no FROM item of any level (every level's FROM is
        known: the caller returned earlier for a select list, an item of unknown name, or a
        match), no schema and no schema qualifier written in FROM: no continuation is a
        valid reference (``q.c`` needs ``q`` bound, ``q.t.c`` needs ``q`` a schema), so any
        restriction is sound. The columns in scope are kept (what the model most likely
        means; the checker then names the right qualifier) and three-part names are blocked
        (``"Book" . ORDERBY .Template_Type_Code`` in the Spider runs)."""
        if q in self.table.schemas or any(i.schema == q for lv in levels for i in lv.items):
            return UNRESTRICTED
        cols = self.table.columns
        names = frozenset().union(
            *(self.item_columns(i) for lv in levels for i in lv.items if i.table in cols)
        )
        return Restriction(names or frozenset().union(*cols.values()), True, True)

    def refused_aliases(self, ctx: Context) -> tuple[frozenset[str], bool]:
        """The names a table may not be aliased as in the FROM clause being written
        (``ctx``'s innermost level open): those its FROM items so far expose, each by its
        alias or else its name (a duplicate alias, which the checker refuses in every
        dialect and no fix can resolve), and ``alias_refuse``. Items of unknown name refuse
        nothing. Returned in two parts, (the exposed names ``alias_refuse`` lacks, whether
        ``alias_refuse`` applies), so a caller keeps the large constant part spelled once
        (``ParserRuntime._alias_view``)."""
        if not ctx.levels or ctx.levels[-1].state != OPEN:
            return frozenset(), False
        if not self.fresh_exposed:
            return frozenset(), True
        items = ctx.levels[-1].items
        exposed = frozenset(i.names[0] for i in items if i.names and i.names[0] != WILDCARD)
        return exposed - self.alias_refuse, True

    def output_aliases(self, ctx: Context) -> frozenset[str] | None:
        """The output aliases a bare name at a sort key of the innermost level may name
        (None: unknown, e.g. an alias spelled as a string)."""
        if not ctx.levels or WILDCARD in ctx.levels[-1].aliases:
            return None
        return frozenset(ctx.levels[-1].aliases)

    def qualifier_names(self, ctx: Context) -> frozenset[str] | None:
        """The names ``q`` for which some continuation of ``q.`` may be valid in ``ctx``
        (None: any name): the complement of :meth:`restriction`'s ``dead``. Every FROM
        item's names at every level, the schemas, and the schema qualifiers written in FROM;
        None when a level's FROM is still to come or an item's name is unknown."""
        levels = ctx.levels
        if not levels:
            return None
        out = set(self.table.schemas)
        for lv in levels:
            if lv.state == NONE:
                return None
            for i in lv.items:
                if WILDCARD in i.names:
                    return None
                out.update(i.names)
                if i.schema:
                    out.add(i.schema)
        return frozenset(out)

    def three_part(self, ctx: Context, schema: bytes, table: bytes) -> Restriction | None:
        """After ``s.t.`` (a three-part column reference) with ``s`` a schema and ``t`` a
        table of the catalog: the columns of ``t`` (of that name in any schema: a union only
        widens), wherever it is written, a select list before its FROM included: ``s.t.c``
        names a column of ``s.t`` whatever the FROM binds. None (the other rules decide)
        outside query levels or for a name the catalog does not know."""
        if not ctx.levels or norm_name(schema) not in self.table.schemas:
            return None
        sc = self.schema_columns
        names = None if sc is None else sc.get((norm_name(schema), norm_name(table)))
        names = names or self.table.columns.get(norm_name(table))
        return Restriction(names, False) if names else None

    def restriction(self, ctx: Context, qualifier: bytes | None) -> Restriction:
        """The column names a COLUMN_NAME position with context ``ctx`` admits.

        ``qualifier``: the lexeme of ``q`` when the position follows ``q.`` (a two-part
        column reference), else None.
        """
        levels = ctx.levels
        if not levels:
            return UNRESTRICTED
        if qualifier is not None:
            q = norm_name(qualifier)
            last = len(levels) - 1
            for k in range(last, -1, -1):
                lv = levels[k]
                if lv.state == NONE:
                    # its FROM is still to come and may bind q (any column), but only a
                    # schema can start a three-part name
                    return Restriction(None, q not in self.table.schemas)
                hits = [i for i in lv.items if q in i.names or WILDCARD in i.names]
                if lv.state in (QB, OPEN) and k != last:
                    # an ORDER BY subquery, a derived table or an ON subquery: whether q
                    # may bind here (correlation, LATERAL) is not decided by the rule
                    if hits:
                        return UNRESTRICTED
                    continue
                if not hits:
                    continue
                if any(self._item_opaque(i, ctx.ctes) for i in hits):
                    return UNRESTRICTED
                names = frozenset().union(*(self.item_columns(i) for i in hits if i.table))
                if not names:
                    return UNRESTRICTED
                return Restriction(names, q not in self.table.schemas)
            return self._unbound(levels, q)
        names_set: set[str] = set()
        for lv in levels:
            if lv.state == NONE:
                return UNRESTRICTED
            for i in lv.items:
                if self._item_opaque(i, ctx.ctes):
                    return UNRESTRICTED
                names_set |= self.item_columns(i) if i.table else frozenset()
            if WILDCARD in lv.aliases:
                return UNRESTRICTED
            names_set.update(lv.aliases)  # output aliases (SQLite resolves them in WHERE ...)
        if not names_set:
            return UNRESTRICTED
        return Restriction(frozenset(names_set) | KEYWORD_ARGS)
