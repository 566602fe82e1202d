"""The scope side of :class:`~grid_sql.parser.incremental.ParserRuntime`: the scope context
of a stack node and the lexicon view (``docs/scope.md``) in force there.

Split out of ``incremental.py``, which keeps the LALR and scanner sides: these methods fold
the scope rules of ``grammar/scope.py`` over the stack (memoized per node), and turn the
context into the memoized view of identifier words (``views.make_view``) the scanner and the
mask walk read. They run as methods of the runtime (``self`` is a ``ParserRuntime``); each
annotates ``self`` so that every attribute it uses is type-checked, and mypy refuses a self
type narrower than the class (``[misc]``), hence the ignore on each ``def``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from ..grammar.lexer import DEAD, START
from ..grammar.lexicon import CategoryWords
from ..grammar.scope import ROOT_CONTEXT, Context, ScopeRules, norm_name
from .ctes import alias_extra, cte_ref_words, defined_column_words, name_spellings
from .stack import StackNode
from .tables import table_name_words
from .views import VIEW_LIMIT, LexiconView, make_view

if TYPE_CHECKING:
    from .incremental import ParserRuntime

_UNSET: Any = object()


class ScopedViews:
    """Scope contexts and lexicon views of ``ParserRuntime`` (a mixin: no state of its own;
    the caches below are the runtime's, set in ``ParserRuntime.__init__``)."""

    _static_alias: frozenset[bytes] | None
    _alias_kinds: dict[int, str]
    _static_output: frozenset[bytes] | None

    # ------------------------------------------------------------------ scopes
    def ctx_at(self: ParserRuntime, node: StackNode) -> Context:  # type: ignore[misc]  # self: the runtime (module doc)
        """The scope context of ``node`` (memoized per node; grammar/scope.py)."""
        c: Context | None = node.ctx
        if c is not None:
            return c
        sem = self.sem
        assert sem is not None
        chain: list[StackNode] = []
        m: StackNode | None = node
        while m is not None and m.ctx is None:
            chain.append(m)
            m = m.parent
        c = ROOT_CONTEXT if m is None else m.ctx
        assert c is not None
        for m in reversed(chain):
            p = m.parent
            c = ROOT_CONTEXT if p is None else sem.step(c, m.symbol, m.value, p.symbol)
            m.ctx = c
        return c

    def lex_at(self: ParserRuntime, node: StackNode) -> LexiconView:  # type: ignore[misc]  # self: the runtime (module doc)
        """The lexicons in force at ``node``: the grammar's own, or with scope-aware
        lexicons the COLUMN_NAME words of the tables in scope (memoized per node)."""
        sem = self.sem
        if sem is None:
            return self.base_lex
        v: LexiconView | None = node.lex
        if v is None:
            v = self._scoped_view(node, sem)
            node.lex = v
        return v

    def _scoped_view(self: ParserRuntime, node: StackNode, sem: ScopeRules) -> LexiconView:  # type: ignore[misc]  # self: the runtime (module doc)
        view = self._names_view(node, sem)
        aggs = sem.aggs
        if (
            aggs.on
            and (self.allowed_mask(node) >> aggs.fn_tid) & 1
            and aggs.banned(self.ctx_at(node))
        ):
            return self._without_aggregates(view, sem)
        return view

    def _without_aggregates(self: ParserRuntime, view: LexiconView, sem: ScopeRules) -> LexiconView:  # type: ignore[misc]  # self: the runtime (module doc)
        """``view`` with FUNCTION_NAME holding no aggregate's name (memoized per view;
        ``grammar/scope_aggregates.py``)."""
        key = ("noagg", view.fp)
        out = self._views.get(key)
        if out is None:
            tid = sem.aggs.fn_tid
            base = view.words[tid]
            kept = frozenset(w for w in base.words if norm_name(w) not in sem.aggs.names)
            lex = dict(view.words)
            lex[tid] = CategoryWords(kept, base.fold_bare_case, base.fold_quoted_case)
            h = hashlib.blake2b(digest_size=16, person=b"grid-sql-scope")
            h.update(b"noagg:" + (view.fp or "").encode())
            out = LexiconView(lex, view.mask | (1 << tid), h.hexdigest())
            if len(self._views) >= VIEW_LIMIT:
                self._views.clear()
            self._views[key] = out
        return out

    def _names_view(self: ParserRuntime, node: StackNode, sem: ScopeRules) -> LexiconView:  # type: ignore[misc]  # self: the runtime (module doc)
        """The view of identifier words at ``node`` before the aggregate rule."""
        allowed = self.allowed_mask(node)
        if allowed & self.fresh_mask:
            view = self._alias_view(node, sem)
            if view is not None:
                return view
        ctes = cte_ref_words(self, node, sem, allowed) + table_name_words(self, node, sem, allowed)
        if not (allowed >> sem.column_tid) & 1:
            if not ctes:
                return self.base_lex  # no column position: generic keys stay scope-free
            return make_view(self, sem, None, False, (), ctes)
        qualifier = None
        three: tuple[bytes, bytes] | None = None  # (s, t) of a three-part `s.t.`
        p = node.parent
        if (
            node.symbol == sem.t_dot
            and p is not None
            and p.symbol == sem.n_any_name
            and isinstance(p.value, bytes)
        ):
            pp = p.parent
            if pp is None or pp.symbol != sem.t_dot:
                qualifier = p.value
            elif (
                pp.parent is not None
                and pp.parent.symbol == sem.n_any_name
                and isinstance(pp.parent.value, bytes)
            ):
                three = (pp.parent.value, p.value)
        ctx = self.ctx_at(node)
        res = (three and sem.three_part(ctx, *three)) or sem.restriction(ctx, qualifier)
        words: frozenset[bytes] | None = None
        bare = qualifier is None and three is None
        aliases = alias_extra(self, node, sem, ctx) if bare else frozenset()
        if res.names is not None:
            index = self._col_index
            # never leave a column position with no word (dead end): empty -> unrestricted
            words = frozenset(w for n in res.names for w in index.get(n, ())) or None
            qualified = words is not None and res.qualified
            spelled = name_spellings(self, sem, aliases)  # output aliases (parser/ctes.py)
            if spelled:
                words = (self.lexicon[sem.column_tid].words if words is None else words) | spelled
        else:
            qualified = res.qualified  # every column, but no three-part name
            # the whole lexicon, plus the columns CTEs and derived tables define (or None)
            words = defined_column_words(self, sem, ctx, aliases)
        quals = () if node.symbol == sem.t_dot else self._qualifier_words(node, ctx, allowed)
        if words is None and not qualified and not quals and not ctes:
            return self.base_lex
        return make_view(self, sem, words, qualified, quals, ctes)

    def _alias_view(self: ParserRuntime, node: StackNode, sem: ScopeRules) -> LexiconView | None:  # type: ignore[misc]  # self: the runtime (module doc)
        """At a table's alias (an IDENT that can only reduce to ``table_alias``, after a
        table name with or without ``AS``): IDENT admits every word but the spellings of
        :meth:`ScopeRules.refused_aliases`, the names the FROM so far exposes (docs/scope.md,
        "Fresh aliases"); None elsewhere or when nothing is refused. The spellings are
        compared ASCII-case-folded quoted or not (SQLite's rule; ``fresh_aliases`` is only
        on there); names that are not ASCII refuse nothing."""
        top = self.shift(node, sem.t_ident)
        kind = self._alias_kinds.get(top.state)
        if kind is None:  # what the word's state may do: a function of the state alone
            kind = self._alias_kinds[top.state] = self._alias_kind(top.state, sem)
        if kind == "output":
            return self._output_alias_view(sem)
        if kind != "table":
            return None
        p = top.parent
        if p is not None and p.symbol == sem.t_as:
            p = p.parent
        if p is None or p.symbol != sem.n_table_name:
            return None  # a derived table, CTE or function: not modelled
        extra, static = sem.refused_aliases(self.ctx_at(node))
        # a complement lexicon keeps every partial lexeme live, so only spellings some
        # longer lexeme extends are refused (bare and quoted ones; never `[q]`)
        if self._static_alias is None:  # ~1,000 names: spelled (and filtered) once per runtime
            every = self._spellings(
                frozenset(n for n in sem.alias_refuse if n.isascii()), sem.t_ident
            )
            kept = frozenset(w for w in every or () if w[:1] != b"[")
            self._static_alias = CategoryWords(kept, True, True).words  # in folded form
        spelled = self._spellings(frozenset(n for n in extra if n.isascii()), sem.t_ident)
        spelled = frozenset(w for w in spelled or () if w[:1] != b"[")
        base = self._static_alias if static else frozenset()
        led = self._blocked_keywords(node)
        if not (spelled or base or led):
            return None
        return self._exclude_view(b"X", spelled, sem, led, base)

    def _blocked_keywords(self: ParserRuntime, node: StackNode) -> frozenset[bytes]:  # type: ignore[misc]  # self: the runtime (module doc)
        """The spellings of the reserved keywords a select-list obligation blocks at
        ``node`` (their stop bits, ``drop_unbound_closers``): where a table's alias may be
        written there, no alias may begin with one (docs/scope.md, "Keyword-led aliases").
        The model that wrote `FROM t GROUP` meant the clause; with the clause refused, the
        word would otherwise go on as an alias (`GROUPBYx`, `WHERE_x`) instead of a join."""
        stops = (self.allowed_mask(node) >> self.stop_shift) & self.reserved_mask
        out = []
        while stops:
            low = stops & -stops
            stops ^= low
            out.append(self.grammar.terminals[low.bit_length() - 1].name.lower().encode())
        return frozenset(out)

    def _alias_kind(self: ParserRuntime, state: int, sem: ScopeRules) -> str:  # type: ignore[misc]  # self: the runtime (module doc)
        """``"table"`` if an IDENT in ``state`` can only reduce to ``table_alias``,
        ``"output"`` if only to an output alias the role's refusals apply to, else ``""``
        (it may go on as something else). Read per state once (``_alias_kinds``): the
        loop runs over the state's whole action row."""
        reduces = output = False
        for t, a in enumerate(self.action[state]):
            if a > 0 and t != sem.t_lpar:
                return ""  # the word may go on as something else
            if a < 0:
                lhs = self.rule_lhs[-a - 1]
                if lhs in sem.nt_output_alias_of and sem.output_refuse:
                    output = True
                elif lhs != sem.nt_table_alias:
                    return ""
                else:
                    reduces = True
        if output and not reduces:
            return "output"
        return "table" if reduces and not output else ""

    def _exclude_view(  # type: ignore[misc]  # self: the runtime (module doc)
        self: ParserRuntime,
        tag: bytes,
        spelled: frozenset[bytes],
        sem: ScopeRules,
        led: frozenset[bytes] = frozenset(),
        base: frozenset[bytes] = frozenset(),
    ) -> LexiconView:
        """The lexicons with IDENT admitting every word but those of ``spelled`` and
        ``base`` and those that begin with a word of ``led`` (memoized). ``base`` is one of
        the runtime's constant sets (``_static_alias``, ~1,000 spellings, already in folded
        form): the memo is keyed by whether it applies, so a lookup never hashes or copies
        it, and a new view does not fold it again (issue #26: a tenth of the cold reserve,
        bench/RESULTS-e2e.md)."""
        key = ("alias" if tag == b"X" else "output", spelled, led, bool(base))
        view = self._views.get(key)
        if view is None:
            lex = dict(self.lexicon)
            extra = CategoryWords(spelled, True, True).words  # folded (lower case)
            spelled = extra | base if base else extra
            lex[sem.t_ident] = CategoryWords(
                spelled, True, True, exclude=True, refused_prefixes=led, folded=True
            )
            h = hashlib.blake2b(digest_size=16, person=b"grid-sql-scope")
            h.update(tag + sem.t_ident.to_bytes(4, "little"))
            for w in sorted(spelled):
                h.update(len(w).to_bytes(4, "little") + w)
            if led:  # (a view without refused prefixes keeps its digest)
                h.update(b"led")
                for w in sorted(led):
                    h.update(len(w).to_bytes(4, "little") + w)
            view = LexiconView(lex, self.lexicon_mask | self.fresh_mask, h.hexdigest())
            if len(self._views) >= VIEW_LIMIT:
                self._views.clear()
            self._views[key] = view
        return view

    def _output_alias_view(self: ParserRuntime, sem: ScopeRules) -> LexiconView | None:  # type: ignore[misc]  # self: the runtime (module doc)
        """At an output alias (an IDENT that can only reduce to ``alias``/``alias_name``):
        IDENT admits every word but the spellings of ``sem.output_refuse``, the names the role
        may not read (issue #30 §3: ``SELECT x AS BirthDate`` would make a denied column look
        answered). Compared like table aliases, ASCII-case-folded quoted or not."""
        if self._static_output is None:
            names = frozenset(n for n in sem.output_refuse if n.isascii())
            self._static_output = frozenset(
                w for w in self._spellings(names, sem.t_ident) or () if w[:1] != b"["
            )
        spelled = self._static_output
        return self._exclude_view(b"O", spelled, sem) if spelled else None

    def _qualifier_words(  # type: ignore[misc]  # self: the runtime (module doc)
        self: ParserRuntime, node: StackNode, ctx: Context, allowed: int
    ) -> tuple[tuple[int, CategoryWords], ...]:
        """Identifier terminals whose word can only be a qualifier at ``node`` (its state
        after the word reduces it to ``any_name`` and nothing else) or a qualifier or an
        ORDER BY output alias (``any_name`` / ``output_alias``), or, PostgreSQL, the head of a
        typed literal (``typed_name``: a type word), each with the words it may
        be there (docs/scope.md, "The `.` after a name"): any other word would be a name no
        continuation of ``q.`` makes a valid reference (``WHERE Total_spent . x`` with
        ``Total_spent`` in no FROM table) or an alias the select list does not have
        (``ORDER BY Paragraph_ID``). ``TABLE_NAME`` keeps the words of its own lexicon that
        are such names; ``IDENT`` admits the names spelled bare and quoted, compared
        case-folded even when quoted (as the rule compares names).
        """
        sem = self.sem
        assert sem is not None
        quals = sem.qualifier_names(ctx)
        if quals is None:
            return ()
        out: list[tuple[int, CategoryWords]] = []
        # a PostgreSQL typed literal's head must be a type word (ScopeRules.typed_words)
        may_be = {sem.nt_any_name, sem.nt_output_alias}
        if sem.typed_words is not None:
            may_be.add(sem.nt_typed_name)
        for tid in sem.qualifier_terms:
            if not (allowed >> tid) & 1:
                continue
            kinds = self._reduced_to(self.shift(node, tid))
            if kinds is None or not kinds <= may_be:
                continue  # the word may be more than a qualifier or an output alias here
            names = quals if sem.nt_any_name in kinds else frozenset()
            if sem.typed_words is not None and sem.nt_typed_name in kinds:
                names = names | sem.typed_words
            if sem.nt_output_alias in kinds:
                aliases = sem.output_aliases(ctx)
                if aliases is None:
                    continue
                names = names | aliases
            # a pure function of (tid, names): memoized, one object per distinct set (the
            # views built from it then meet in make_view's memo by identity-cheap equality)
            ck = (tid, names)
            cat = self._qual_cats.get(ck, _UNSET)
            if cat is _UNSET:
                base = self.lexicon.get(tid)
                if base is not None:
                    kept = frozenset(w for w in base.words if norm_name(w) in names)
                    cat = CategoryWords(kept, base.fold_bare_case, base.fold_quoted_case)
                else:
                    spelled = self._spellings(names, tid)
                    cat = None if spelled is None else CategoryWords(spelled, True, True)
                if len(self._qual_cats) >= VIEW_LIMIT:
                    self._qual_cats.clear()
                self._qual_cats[ck] = cat
            if cat is not None:
                out.append((tid, cat))
        return tuple(out)

    def _reduced_to(self: ParserRuntime, node: StackNode) -> set[int] | None:  # type: ignore[misc]  # self: the runtime (module doc)
        """The left-hand sides of the rules the top state of ``node`` may reduce by (None
        if it may shift or accept: the name is not complete there)."""
        lhs = self.rule_lhs
        out: set[int] = set()
        for a in self.action[node.state]:
            if a > 0:
                return None
            if a < 0:
                out.add(lhs[-a - 1])
        return out

    def _spellings(self: ParserRuntime, names: frozenset[str], tid: int) -> frozenset[bytes] | None:  # type: ignore[misc]  # self: the runtime (module doc)
        """Every bare and quoted spelling of ``names`` that lexes as ``tid`` (lower case:
        the category compares case-folded); None if a name is not ASCII (``norm_name``
        folds Unicode case, the lexicon ASCII only: no exact list)."""
        out: set[bytes] = set()
        trans, accept = self.trans, self.accept_masks
        for n in names:
            if not n.isascii():
                return None
            forms = [n, '"' + n.replace('"', '""') + '"', "`" + n.replace("`", "``") + "`"]
            if "]" not in n:
                forms.append("[" + n + "]")
            for f in forms:
                w = f.encode()
                st = START
                for b in w:
                    st = trans[st * 256 + b]
                    if st == DEAD:
                        break
                if st != DEAD and (accept[st] >> tid) & 1:
                    out.add(w)
        return frozenset(out)
