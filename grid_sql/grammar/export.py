"""Export a grid-sql grammar for engines that cannot run grid-sql's masks (issue #7 §1).

When a vLLM server has no grid-sql logits processor, the declared fallback is to hand the
role's grammar to the server's own structured-output backend: llguidance takes Lark,
XGrammar takes EBNF (llama.cpp GBNF style). The mask is then the backend's, not ours, so the
export only has to be a *superset* of grid-sql's language: every statement grid-sql admits
must be admitted there, and the post-parse policy checker still gates execution of whatever
comes back. The adaptations that make the exported language differ are returned with the
text (:attr:`GrammarExport.adaptations`) so a caller can record what ran.

Every export works on any grammar of the pipeline: an L1 dialect, an L2 role projection or an
L3 grammar with a schema lexicon, whose category terminals become alternations of their
allowed words (a bare word is case-insensitive when the lexicon folds bare case).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import GrammarExportError
from .ir import Grammar, Terminal
from .lexicon import QUOTE_BYTES, CategoryWords

__all__ = [
    "GrammarExport",
    "to_ebnf",
    "to_llguidance_lark",
    "to_vllm_structured_outputs",
]


@dataclass(frozen=True)
class GrammarExport:
    """An exported grammar: its text, its format and what differs from grid-sql's language."""

    format: Literal["llguidance-lark", "ebnf"]
    text: str
    start: str
    adaptations: tuple[str, ...]
    grammar_fingerprint: str


def _rule_alternatives(g: Grammar) -> list[tuple[str, list[tuple[str, ...]]]]:
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in g.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)
    order = [g.start] + sorted(k for k in by_lhs if k != g.start)
    return [(lhs, by_lhs[lhs]) for lhs in order]


def _exported_terminals(g: Grammar) -> list[Terminal]:
    """Terminals some production uses, plus the ignored ones (whitespace, comments)."""
    used = g.used_terminals
    return [t for t in g.terminals if t.name in used or t.ignored]


def _lexicon_words(g: Grammar, t: Terminal) -> CategoryWords | None:
    if g.lexicon is None or t.name not in g.lexicon:
        return None
    return g.lexicon[t.name]


def _decode_word(t: Terminal, w: bytes) -> str:
    try:
        return w.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GrammarExportError(
            f"lexicon word {w!r} of {t.name} is not UTF-8: text grammars cannot spell it"
        ) from exc


def _word_is_folded(cat: CategoryWords, w: bytes) -> bool:
    return cat.fold_bare_case and bool(w) and w[0] not in QUOTE_BYTES


_COMMON_NOTES = (
    "languages are over Unicode text: grid-sql's terminal regexes run over bytes, so a "
    "negated class such as [^'] also matches a byte that is not valid UTF-8 in grid-sql; "
    "LLM output is text, so no statement grid-sql admits from a text model is lost",
    "terminal priorities are dropped (identifier categories, keywords over identifiers): "
    "grid-sql resolves a lexeme that several terminals match by maximal munch, contextual "
    "acceptability and priority; the export leaves every matching terminal to the parser, "
    "which only adds readings (a keyword may also be read as an alias identifier)",
)


# ----------------------------------------------------------------------------- llguidance
_CTRL = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x0c": "\\f", "\x0b": "\\v"}


def _lark_regex(pat: str) -> str:
    """A Python regex as a lark ``/.../`` body: raw control characters and ``/`` escaped."""
    out = []
    prev_bs = False
    for ch in pat:
        if ch in _CTRL:
            out.append(_CTRL[ch])
        elif ch == "/" and not prev_bs:
            out.append("\\/")
        else:
            out.append(ch)
        prev_bs = ch == "\\" and not prev_bs
    return "".join(out)


def _lark_name(n: str, prefix: str) -> str:
    # lark inlines `_rule` and filters `_TERM`; the export must keep both as they are
    return prefix + n if n.startswith("_") else n


def _same_regex_aliases(g: Grammar, terms: list[Terminal]) -> dict[str, str]:
    """Terminal name -> the first (by name) terminal with the same regex, for terminals
    without a lexicon: those the exports may write as one lexeme without changing the
    language (lexicon terminals differ by their word sets, ignored ones by their role)."""
    alias: dict[str, str] = {}
    first: dict[str, str] = {}
    for t in sorted(terms, key=lambda t: t.name):
        if not t.ignored and _lexicon_words(g, t) is None:
            alias[t.name] = first.setdefault(t.pattern, t.name)
    return alias


def to_llguidance_lark(grammar: Grammar, *, merge_same_regex: bool = False) -> GrammarExport:
    """The grammar in llguidance's Lark dialect (also what vLLM's ``guidance`` backend takes).

    ``merge_same_regex`` writes terminals that share one regex as a single lexeme (the same
    llguidance language, fewer lexemes; used by the mask benchmark as a variant).
    """
    g = grammar
    notes = list(_COMMON_NOTES) + [
        "rules come from grid-sql's resolved grammar (lark already expanded [x], x*, x+ and "
        "%import/%override/%extend); a rule with an empty alternative is written "
        "`lhs: (alt | ...)?`; names starting with `_` get an `r`/`T` prefix so lark's "
        "inlining and filtering do not apply",
        '`%llguidance {"allow_initial_skip": true}`: grid-sql skips ignored lexemes before '
        "the first token; llguidance does not by default",
        "lexing: llguidance's lexer admits every lexeme the parser allows and may end a "
        "lexeme where the next one can start (`selected` = SELECT + identifier `ed`), where "
        "grid-sql lexes by maximal munch; this only adds sentences",
        "known refusals (grid-sql admits, llguidance refuses): llguidance does not give up "
        "a lexeme whose longer reading is still viable when the next lexeme starts without "
        "a separator: MySQL `SELECT 2--1` (`--` before a digit is minus, minus; no comment), "
        "`... > 1except SELECT ...` (`1e` could still become a number); with a space "
        "(`2 - -1`, `1 EXCEPT`) both are admitted",
    ]
    terms = _exported_terminals(g)
    names = {t.name for t in g.terminals}
    alias = _same_regex_aliases(g, terms) if merge_same_regex else {}
    if merged := sorted(k for k, a in alias.items() if k != a):
        notes.append(
            "terminals with identical regexes merged into one lexeme "
            f"({', '.join(f'{k}->{alias[k]}' for k in merged)}); same llguidance language"
        )

    def sym(s: str) -> str:
        return _lark_name(alias.get(s, s), "T") if s in names else _lark_name(s, "r")

    lines = ['%llguidance {"allow_initial_skip": true}', ""]
    for lhs, alts in _rule_alternatives(g):
        bodies = [" ".join(sym(s) for s in a) for a in alts if a]
        body = " | ".join(bodies)
        if any(not a for a in alts):
            body = f"({body})?"
        lines.append(f"{_lark_name(lhs, 'r')}: {body}")
    lines.append("")
    for t in terms:
        if alias.get(t.name, t.name) != t.name:
            continue
        cat = _lexicon_words(g, t)
        if cat is not None:
            words = sorted(cat.words)
            lits = [
                json.dumps(_decode_word(t, w)) + ("i" if _word_is_folded(cat, w) else "")
                for w in words
            ]
            lines.append(f"{_lark_name(t.name, 'T')}: {' | '.join(lits)}")
        elif t.is_string and t.pattern.startswith("(?i:") and t.pattern.endswith(")"):
            lit = re.sub(r"\\(.)", r"\1", t.pattern[4:-1])
            lines.append(f"{_lark_name(t.name, 'T')}: {json.dumps(lit)}i")
        elif t.is_string:
            lit = re.sub(r"\\(.)", r"\1", t.pattern)
            lines.append(f"{_lark_name(t.name, 'T')}: {json.dumps(lit)}")
        else:
            lines.append(f"{_lark_name(t.name, 'T')}: /{_lark_regex(t.pattern)}/")
    for t in terms:
        if t.ignored:
            lines.append(f"%ignore {_lark_name(t.name, 'T')}")
    if g.lexicon is not None:
        notes.append(
            "identifier categories with a schema lexicon are alternations of their words "
            "(bare words case-insensitive under bare-case folding, quoted words exact)"
        )
    return GrammarExport(
        "llguidance-lark", "\n".join(lines) + "\n", g.start, tuple(notes), g.fingerprint
    )


# ----------------------------------------------------------------------------- EBNF
def _sre() -> tuple[Any, Any]:
    # CPython's own regex parser (re._parser, re._constants): the terminal regexes are
    # Python regexes, so their structure is read exactly as `re` reads it
    import importlib

    return importlib.import_module("re._parser"), importlib.import_module("re._constants")


_GBNF_NAMED = {0x22: '\\"', 0x5C: "\\\\", 0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _gbnf_chars(cps: Iterable[int | str], in_class: bool = False) -> str:
    """Code points (ints) and raw syntax (str, e.g. a range's ``-``) as GBNF text.

    Printable ASCII stays as is; ``"`` and ``\\``, newline, tab and return get their named
    escapes (what XGrammar, llama.cpp and llguidance's GBNF reader all accept); other control
    characters and, inside a class, ``[ ] - ^ "`` are ``\\xHH`` (llguidance's reader
    mis-converts ``\\"`` in a class). XGrammar reads as many
    hex digits as follow a ``\\x``, so a hex digit right after one is escaped too.
    """
    out: list[str] = []
    prev_hex = False
    for cp in cps:
        if isinstance(cp, str):
            out.append(cp)
            prev_hex = False
            continue
        ch = chr(cp)
        if cp in _GBNF_NAMED and not (in_class and cp == 0x22):
            out.append(_GBNF_NAMED[cp])
            prev_hex = False
        elif (
            cp < 0x20
            or cp == 0x7F
            or (in_class and ch in '[]-^"')
            or (prev_hex and ch in _HEX_DIGITS)
        ):
            out.append(f"\\x{cp:02X}")
            prev_hex = True
        else:
            out.append(ch)  # printable ASCII and non-ASCII text as is (UTF-8)
            prev_hex = False
    return "".join(out)


def _gbnf_string(s: str) -> str:
    return '"' + _gbnf_chars(ord(ch) for ch in s) + '"'


def _fold_string(s: str) -> str:
    """A case-insensitive literal: each ASCII letter as a two-character class."""
    parts = []
    run = ""
    for ch in s:
        if ch.isascii() and ch.isalpha():
            if run:
                parts.append(_gbnf_string(run))
                run = ""
            parts.append(f"[{ch.lower()}{ch.upper()}]")
        else:
            run += ch
    if run:
        parts.append(_gbnf_string(run))
    return " ".join(parts) if parts else '""'


_CATEGORY_RANGES = {
    "CATEGORY_DIGIT": [(0x30, 0x39)],
    "CATEGORY_SPACE": [(0x09, 0x0D), (0x20, 0x20)],
    "CATEGORY_WORD": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
}


def _fold_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = list(ranges)
    for lo, hi in ranges:
        for a, b, shift in ((0x41, 0x5A, 0x20), (0x61, 0x7A, -0x20)):
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                out.append((x + shift, y + shift))
    return out


def _class(ranges: list[tuple[int, int]], negate: bool) -> str:
    units: list[int | str] = []
    for lo, hi in sorted(set(ranges)):
        units += [lo] if lo == hi else [lo, "-", hi]
    return f"[{'^' if negate else ''}{_gbnf_chars(units, in_class=True)}]"


def regex_to_ebnf(pattern: str) -> str:
    """A Python regex (grid-sql's terminal language) as a GBNF expression.

    Covers what terminal regexes use: literals, classes (ranges, negation, \\d\\s\\w),
    ``.``, alternation, groups with the ``i``/``s`` flags, and bounded or unbounded
    repetition. Anchors, backreferences and lookarounds have no GBNF form and raise
    :class:`~grid_sql.errors.GrammarExportError`.
    """
    p, c = _sre()
    try:
        tree = p.parse(pattern)
    except re.error as exc:
        raise GrammarExportError(f"terminal regex {pattern!r} does not parse: {exc}") from exc
    return _seq(tree, bool(tree.state.flags & re.IGNORECASE), bool(tree.state.flags & re.S), c)


def _seq(items: Iterable[Any], fold: bool, dotall: bool, c: Any) -> str:
    parts: list[str] = []
    lit = ""

    def flush() -> None:
        nonlocal lit
        if lit:
            parts.append(_fold_string(lit) if fold else _gbnf_string(lit))
            lit = ""

    for op, av in items:
        if op is c.LITERAL:
            lit += chr(av)
            continue
        flush()
        parts.append(_atom(op, av, fold, dotall, c))
    flush()
    if not parts:
        return '""'
    return " ".join(parts)


def _atom(op: Any, av: Any, fold: bool, dotall: bool, c: Any) -> str:
    if op is c.NOT_LITERAL:
        rs = [(av, av)]
        return _class(_fold_ranges(rs) if fold else rs, True)
    if op is c.ANY:
        # no "[^]": llguidance's GBNF reader refuses an empty negated class
        return '([^\\n] | "\\n")' if dotall else "[^\\n]"
    if op is c.IN:
        negate = False
        ranges: list[tuple[int, int]] = []
        for iop, iav in av:
            if iop is c.NEGATE:
                negate = True
            elif iop is c.LITERAL:
                ranges.append((iav, iav))
            elif iop is c.RANGE:
                ranges.append((iav[0], iav[1]))
            elif iop is c.CATEGORY and str(iav) in _CATEGORY_RANGES:
                ranges.extend(_CATEGORY_RANGES[str(iav)])
            else:
                raise GrammarExportError(f"regex class item {iop} {iav} has no GBNF form")
        return _class(_fold_ranges(ranges) if fold else ranges, negate)
    if op is c.BRANCH:
        return "(" + " | ".join(_seq(b, fold, dotall, c) for b in av[1]) + ")"
    if op is c.SUBPATTERN:
        _group, add, rem, sub = av
        f = (fold or bool(add & re.IGNORECASE)) and not bool(rem & re.IGNORECASE)
        d = (dotall or bool(add & re.S)) and not bool(rem & re.S)
        return "(" + _seq(sub, f, d, c) + ")"
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
        lo, hi, sub = av
        item = "(" + _seq(sub, fold, dotall, c) + ")"
        unbounded = hi is c.MAXREPEAT
        if lo == 0 and unbounded:
            return item + "*"
        if lo == 1 and unbounded:
            return item + "+"
        if lo == 0 and hi == 1:
            return item + "?"
        # bounded counts spelled out: not every GBNF reader knows {m,n}
        req = [item] * lo
        if unbounded:
            return " ".join(req + [item + "*"])
        opt = ""
        for _ in range(hi - lo):
            opt = f"({item} {opt})?" if opt else f"{item}?"
        return " ".join(req + ([opt] if opt else [])) or '""'
    raise GrammarExportError(f"regex construct {op} has no GBNF form")


def _ebnf_name(n: str, kind: str) -> str:
    """GBNF rule names are [A-Za-z0-9-]: `_` becomes `-`; a leading `_` gets a prefix."""
    base = n.replace("_", "-")
    if n.startswith("_"):
        base = ("r" if kind == "rule" else "T") + base
    return base


def _ignored_item(t: Terminal) -> str:
    """One ignored lexeme inside ``sp ::= (...)*``; a top-level ``x+`` becomes ``x``
    (the enclosing star already repeats it, and the Earley parser then has one reading)."""
    p, c = _sre()
    tree = p.parse(t.pattern)
    items = list(tree)
    if len(items) == 1 and items[0][0] is c.MAX_REPEAT:
        lo, hi, sub = items[0][1]
        if lo == 1 and hi is c.MAXREPEAT:
            return "(" + _seq(sub, False, False, c) + ")"
    return "(" + regex_to_ebnf(t.pattern) + ")"


def _single_class(t: Terminal) -> list[tuple[int, int]] | None:
    """The character ranges of an ignored terminal that is one class repeated (``[..]+``,
    ``[..]*``, ``[..]``, a single literal), else None (comments and other sequences)."""
    p, c = _sre()
    items = list(p.parse(t.pattern))
    if len(items) == 1 and items[0][0] in (c.MAX_REPEAT, c.MIN_REPEAT):
        lo, hi, sub = items[0][1]
        if lo > 1 or hi is not c.MAXREPEAT:
            return None
        items = list(sub)
    if len(items) != 1:
        return None
    op, av = items[0]
    if op is c.LITERAL:
        return [(av, av)]
    if op is not c.IN:
        return None
    ranges: list[tuple[int, int]] = []
    for iop, iav in av:
        if iop is c.LITERAL:
            ranges.append((iav, iav))
        elif iop is c.RANGE:
            ranges.append((iav[0], iav[1]))
        elif iop is c.CATEGORY and str(iav) in _CATEGORY_RANGES:
            ranges.extend(_CATEGORY_RANGES[str(iav)])
        else:  # NEGATE and anything else: not a plain separator class
            return None
    return ranges


def _string_literal(t: Terminal) -> str:
    """The text of a string terminal (its pattern is the escaped literal, maybe ``(?i:..)``)."""
    pat = t.pattern
    if pat.startswith("(?i:") and pat.endswith(")"):
        pat = pat[4:-1]
    return re.sub(r"\\(.)", r"\1", pat)


def _munch_followers(lit: str, terms: list[Terminal]) -> list[int]:
    """ASCII characters ``c`` for which ``lit + c`` is a whole lexeme of some terminal.

    grid-sql lexes by maximal munch, so such a ``c`` never follows the lexeme ``lit``
    (``SELECTa`` is one identifier, not SELECT + ``a``). Only verified characters are
    listed: excluding them after ``lit`` removes readings grid-sql never has, nothing more.
    """
    pats = [re.compile(t.pattern) for t in terms]
    return [cp for cp in range(128) if any(p.fullmatch(lit + chr(cp)) for p in pats)]


def to_ebnf(
    grammar: Grammar,
    *,
    root: str = "root",
    merge_same_regex: bool = True,
    style: Literal["gbnf", "xgrammar"] = "gbnf",
) -> GrammarExport:
    """The grammar as EBNF in the GBNF style ``xgrammar.Grammar.from_ebnf`` and llama.cpp read.

    GBNF has no lexer: each terminal becomes a rule that starts with the optional ignored
    material ``sp`` (whitespace, and comments where the grammar ignores them), and the root
    is ``<start> sp``. ``merge_same_regex`` writes terminals with one regex (the identifier
    categories without a lexicon) as one rule: the same language, fewer parallel items for
    XGrammar's Earley parser.

    ``style="xgrammar"`` writes ``sp`` as one character class starred (the whitespace
    terminals' union) and leaves the other ignored terminals (comments) out; each string
    terminal (keyword, operator) gets a lookahead ``(= [^...])`` naming the characters which
    would make grid-sql's maximal munch read a longer lexeme (XGrammar prunes tokens with it;
    see the adaptations for what that does to the language). Measured on
    XGrammar 0.2.9 with GPT-2 (bench/RESULTS-masks.md): with any other form of ``sp`` (even
    ``(ws | "--" "x")*``) a mask fill after the first token takes seconds; with a class star
    it takes milliseconds. The price is a smaller language: statements with comments are
    refused, so this style is for measuring XGrammar, not for the vLLM fallback (which must
    admit everything grid-sql admits and keeps ``style="gbnf"``).
    """
    g = grammar
    notes = list(_COMMON_NOTES) + [
        "no lexer: every terminal is a character-level rule preceded by `sp` (the grammar's "
        "ignored terminals, repeated); the parser may therefore split a word where grid-sql "
        "would not (`SELECTa` = SELECT + identifier `a`, `FROMt` likewise); this only adds "
        "sentences",
        "names: GBNF rule names are [A-Za-z0-9-], so `_` is written `-` (nonterminals stay "
        "lower case and terminals upper case, so names cannot collide); the root rule is "
        f"`{root}`",
        "bounded repetitions are spelled out and case-insensitive keywords are written as "
        "two-letter classes ([sS][eE]...)",
    ]
    terms = _exported_terminals(g)
    names = {t.name for t in g.terminals}
    ignored = [t for t in terms if t.ignored]
    sp_class: list[tuple[int, int]] = []
    if style == "xgrammar":
        dropped = []
        for t in ignored:
            ranges = _single_class(t)
            if ranges is None:
                dropped.append(t)
            else:
                sp_class += ranges
        ignored = [t for t in ignored if t not in dropped]
        notes.append(
            "style xgrammar: `sp` is one character class starred (the union of "
            f"{', '.join(t.name for t in ignored) or 'no'} ignored terminals), which XGrammar "
            "fills in milliseconds where any other `sp` (comments included) took seconds"
        )
        if dropped:
            notes.append(
                "style xgrammar, smaller language: the ignored terminals "
                + ", ".join(f"{t.name} {t.pattern!r}" for t in dropped)
                + " are left out, so a statement containing one (a comment) is refused "
                "where grid-sql admits it; not a fallback for vLLM (use style gbnf there)"
            )
    elif style != "gbnf":
        raise GrammarExportError(f"unknown EBNF style {style!r} (known: gbnf, xgrammar)")
    sp = "sp " if ignored else ""
    alias = _same_regex_aliases(g, terms) if merge_same_regex else {}
    if merged := sorted(k for k, a in alias.items() if k != a):
        notes.append(
            "terminals with identical regexes written as one rule "
            f"({', '.join(f'{k}->{alias[k]}' for k in merged)}); same language"
        )

    def sym(s: str) -> str:
        if s in names:
            return _ebnf_name(alias.get(s, s), "term")
        return _ebnf_name(s, "rule")

    n_lookahead = 0
    lines = [f"{root} ::= {sym(g.start)}" + (" sp" if ignored else "")]
    for lhs, alts in _rule_alternatives(g):
        bodies = [" ".join(sym(s) for s in a) if a else '""' for a in alts]
        lines.append(f"{sym(lhs)} ::= " + " | ".join(bodies))
    for t in terms:
        if t.ignored or alias.get(t.name, t.name) != t.name:
            continue
        cat = _lexicon_words(g, t)
        if cat is not None:
            words = sorted(cat.words)
            spelled = [
                _fold_string(_decode_word(t, w))
                if _word_is_folded(cat, w)
                else _gbnf_string(_decode_word(t, w))
                for w in words
            ]
            body = "(" + " | ".join(spelled) + ")"
        else:
            body = regex_to_ebnf(t.pattern)
        if style == "xgrammar" and cat is None and t.is_string:
            follow = _munch_followers(_string_literal(t), terms)
            if follow:
                n_lookahead += 1
                body += f" (= {_class([(c, c) for c in follow], True)})"
        lines.append(f"{sym(t.name)} ::= {sp}{body}")
    if style == "xgrammar":
        notes.append(
            f"style xgrammar: {n_lookahead} string terminals (keywords, operators) end in a "
            "lookahead `(= [^...])` naming the ASCII characters after which grid-sql's "
            "maximal munch reads a longer lexeme (`SELECTa` is one identifier, `<=` one "
            "operator); XGrammar uses a lookahead to prune tokens, not to refuse bytes: a "
            "token that ends a keyword and goes on with an excluded character (`SELECTa` at a "
            "statement start) is masked out, but the same text over two tokens (`SELECT`, "
            "`a`) is still accepted, so the language depends on the tokenization and lies "
            "between grid-sql's and the gbnf export's; non-ASCII followers are not excluded"
        )
    if ignored and style == "xgrammar":
        lines.append(f"sp ::= {_class(sp_class, False)}*")
    elif ignored:
        lines.append("sp ::= (" + " | ".join(_ignored_item(t) for t in ignored) + ")*")
    if g.lexicon is not None:
        notes.append(
            "identifier categories with a schema lexicon are alternations of their words "
            "(bare words case-insensitive under bare-case folding, quoted words exact)"
        )
    return GrammarExport("ebnf", "\n".join(lines) + "\n", g.start, tuple(notes), g.fingerprint)


# ----------------------------------------------------------------------------- vLLM
_VLLM_BACKENDS: dict[str, Callable[[Grammar], GrammarExport]] = {
    "guidance": to_llguidance_lark,
    "xgrammar": to_ebnf,
}


def to_vllm_structured_outputs(
    grammar: Grammar, backend: Literal["xgrammar", "guidance"] = "xgrammar"
) -> tuple[dict[str, str], GrammarExport]:
    """The ``structured_outputs`` request field for a vLLM server without grid-sql's
    processor, and the export it carries.

    vLLM's ``xgrammar`` backend compiles GBNF-style EBNF (a text without ``::=`` would be
    taken for Lark and run through vLLM's own, partial Lark converter); its ``guidance``
    backend reads llguidance Lark (llguidance's own GBNF reader renames rules and does not
    read this EBNF, so each backend gets its native format). The old ``guided_grammar``
    field is ignored by current vLLM, so only ``{"grammar": ...}`` is produced.
    """
    try:
        export = _VLLM_BACKENDS[backend](grammar)
    except KeyError:
        raise GrammarExportError(
            f"unknown vLLM structured-output backend {backend!r} (known: {sorted(_VLLM_BACKENDS)})"
        ) from None
    return {"grammar": export.text}, export
