"""Blocked intent (issue #30): what the model wanted to write where the mask said no.

The mask makes a denied table or column unwritable, but a model that wanted one then writes
*something else* that is allowed, and the answer looks like an answer (`SELECT Fax,
SupportRepId FROM Customer` for "phone numbers and e-mails"). The decode loop records every
sampled step whose favourite token was outside the mask (:class:`BlockedIntent`); this module
reads those favourites against the names the role may not use. A favourite that spells (a
prefix of) a denied table or column, and of no name the role may read, means the question
needs that object: the Asker then refuses with the reason instead of answering something else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..decode.loop import BlockedIntent
from ..errors import PolicyRefusal
from ..mask.vocab import Vocabulary
from ..policy.model import Policy
from ..schema.model import SchemaSnapshot

__all__ = [
    "DeniedIntent",
    "denied_intents",
    "denied_names",
    "intent_flags",
    "needs_of",
    "question_intents",
    "refusal",
]

MIN_WORD = 4  # shorter spellings prefix too many names to say which one was meant
MIN_PROB = 0.2  # a favourite the model was unsure of is no evidence

_IDENT_TAIL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_IDENT_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class DeniedIntent:
    """A blocked favourite that spells a name the role may not use: ``word`` as the model
    spelled it, ``needs`` the denied objects it is a prefix of (``Table`` or
    ``Table.Column``), ``step`` and ``prob`` from the :class:`BlockedIntent`."""

    step: int
    word: str
    needs: tuple[str, ...]
    prob: float


def denied_names(snapshot: SchemaSnapshot, policy: Policy) -> tuple[dict[str, set[str]], set[str]]:
    """(denied: lower-cased name -> the objects it names, readable: lower-cased names the
    role may read). Tables without SELECT are denied by name; columns the role may not read
    are denied as ``Table.Column`` (every column of a denied table too)."""
    denied: dict[str, set[str]] = {}
    readable: set[str] = set()
    for schema, t in snapshot.iter_tables():
        tp = policy.table(t.name, schema)
        if tp is None or not tp.allows("select"):
            denied.setdefault(t.name.lower(), set()).add(t.name)
            for c in t.column_names:
                denied.setdefault(c.lower(), set()).add(f"{t.name}.{c}")
            continue
        readable.add(t.name.lower())
        for c in t.column_names:
            if tp.readable(c):
                readable.add(c.lower())
            else:
                denied.setdefault(c.lower(), set()).add(f"{t.name}.{c}")
    return denied, readable


def _word(prefix: bytes, token: bytes) -> str:
    """The identifier the favourite token writes: the prefix's trailing identifier continued
    by the token, or the identifier the token starts after a space or an opening quote."""
    tok = token.decode("utf-8", "replace")
    head = _IDENT_HEAD.match(tok)
    if head is not None:  # continues the identifier under way (or starts one right away)
        tail = _IDENT_TAIL.search(prefix.decode("utf-8", "replace"))
        return (tail.group(0) if tail is not None else "") + head.group(0)
    rest = tok.lstrip(' \t\n"`[.')  # `.Phone`: the column of a qualified name
    if rest == tok:
        return ""
    head = _IDENT_HEAD.match(rest)
    return head.group(0) if head is not None else ""


def denied_intents(
    token_ids: Sequence[int],
    blocked: Sequence[BlockedIntent],
    vocab: Vocabulary,
    snapshot: SchemaSnapshot,
    policy: Policy,
) -> list[DeniedIntent]:
    """The blocked favourites of one generation that spell a name the role may not use."""
    if not blocked:
        return []
    denied, readable = denied_names(snapshot, policy)
    if not denied:
        return []
    out: list[DeniedIntent] = []
    for b in blocked:
        if b.prob < MIN_PROB:
            continue
        prefix = vocab.spell(list(token_ids[: b.step]))
        token = vocab.token_bytes[b.token]
        words = [_word(prefix, token)]
        if not _IDENT_HEAD.match(token.decode("utf-8", "replace")):
            # the favourite ends the name under way where the grammar would not let it end
            # (`SELECT BirthDate` + ` FROM`: a denied column is no COLUMN_NAME, so the word
            # could only go on as a qualifier): the model wanted that name, complete
            tail = _IDENT_TAIL.search(prefix.decode("utf-8", "replace"))
            if tail is not None:
                words.append(tail.group(0))
        text = prefix.decode("utf-8", "replace").lower()
        for word in words:
            hit = _match(word, denied, readable, text)
            if hit:
                out.append(DeniedIntent(b.step, word, hit, b.prob))
    return out


def _match(
    word: str, denied: dict[str, set[str]], readable: set[str], text: str
) -> tuple[str, ...]:
    """The denied objects ``word`` names: exact names first, else those it is a prefix of;
    narrowed to the tables the statement so far mentions when some of them do (``Email``
    with ``Customer`` in the prefix is ``Customer.Email``, not ``Employee.Email``)."""
    key = word.lower()
    if len(key) < MIN_WORD or any(r.startswith(key) for r in readable):
        return ()
    objs = denied.get(key) or {o for n, os_ in denied.items() if n.startswith(key) for o in os_}
    named = {o for o in objs if re.search(rf"\b{re.escape(o.split('.')[0].lower())}\b", text)}
    return tuple(sorted(named or objs))


_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _sing(w: str) -> str:
    """A crude singular (both sides get the same one): ``addresses`` -> ``address``,
    ``employees`` -> ``employee``, ``dates`` -> ``date``."""
    if len(w) > 4 and w.endswith("sses"):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _name_words(name: str) -> tuple[str, ...]:
    """``BirthDate`` -> (birth, date); ``total_sales`` -> (total, sale)."""
    return tuple(_sing(w.lower()) for part in name.split("_") for w in _CAMEL.findall(part))


def question_intents(question: str, snapshot: SchemaSnapshot, policy: Policy) -> list[DeniedIntent]:
    """The denied objects ``question`` names in words (``step`` -1, ``prob`` 1.0): a table or
    column the role may not read whose name, split into words (``BirthDate``: birth date),
    occurs in the question as words (case, plural ``-s``/``-es`` and ``e-mail`` folded), and
    which names nothing the role may read (``Title`` of a denied ``Employee`` is also
    ``Album.Title``: no evidence). Why besides the blocked favourites: the prompt shows the
    role's schema only, so a model that never saw ``Customer.Phone`` does not try to write it
    and answers with what it sees (``SELECT Fax, SupportRepId`` for phone numbers, measured
    with the 1.5B in bench/RESULTS-honest-answers.md)."""
    denied, readable = denied_names(snapshot, policy)
    text = re.sub(r"(?<=[A-Za-z])-(?=[A-Za-z])", "", question)
    words = [_sing(w.lower()) for w in _CAMEL.findall(text)]
    joined = [w.lower() for w in re.findall(r"[A-Za-z0-9_]+", text)]
    out: list[DeniedIntent] = []
    for key, objs in sorted(denied.items()):
        if key in readable:
            continue
        nw = _name_words(next(iter(objs)).split(".")[-1])
        if not nw or (len(nw) == 1 and len(nw[0]) < MIN_WORD):
            continue
        n = len(nw)
        hit = any(tuple(words[i : i + n]) == nw for i in range(len(words) - n + 1))
        if hit or key in joined or _sing(key) in {_sing(w) for w in joined}:
            out.append(DeniedIntent(-1, " ".join(nw), tuple(sorted(objs)), 1.0))
    return out


def intent_flags(wanted: Sequence[DeniedIntent]) -> tuple[str, ...]:
    """Seal flags: ``blocked-intent:<object>`` for a blocked favourite's, ``question-needs:
    <object>`` for the question's own words."""
    flags = [
        f"{'question-needs' if w.step < 0 else 'blocked-intent'}:{n}"
        for w in wanted
        for n in w.needs
    ]
    return tuple(sorted(dict.fromkeys(flags)))


def needs_of(wanted: Sequence[DeniedIntent]) -> list[str]:
    """The denied objects ``wanted`` names, sorted (the refusal's ``needs``)."""
    return sorted({n for w in wanted for n in w.needs})


def refusal(wanted: Sequence[DeniedIntent], sql: str | None) -> PolicyRefusal:
    """The refusal of a question that needs denied objects (issue #30): what it needs, that
    the role cannot read it, nothing executed; the statement the mask let through instead is
    kept on the error for the caller who wants to see it, never run."""
    needs = needs_of(wanted)
    spelled = ", ".join(sorted({w.word for w in wanted if w.step >= 0}))
    asked = ", ".join(sorted({w.word for w in wanted if w.step < 0}))
    why = "; ".join(
        x
        for x in (
            f"the question asks for {asked}" if asked else "",
            f"the model tried to write {spelled}" if spelled else "",
        )
        if x
    )
    return PolicyRefusal(
        f"this question needs {', '.join(needs)}, which the role may not read ({why}); "
        "nothing was executed. Ask for data the role can read, "
        "or use a role with access (on_denied='answer_allowed_part' answers what is allowed).",
        needs,
        sql=sql,
    )
