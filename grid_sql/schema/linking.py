"""Schema linking: which tables and columns of a large catalog a question needs.

Why: a warehouse has thousands of tables and a small model's context holds a few dozen table
descriptions at most, so the prompt can describe only a handful in full (issue #25 §2). The
grammar is not narrowed by this (its lexicon still admits every table the role may read): the
linker only decides what the *prompt* shows, so a wrong pick costs accuracy, never a refusal.

How (lexical, no model: nothing to download, deterministic, microseconds per table):

* every table is indexed by the words of its name, its columns' names, and catalog comments
  (PostgreSQL ``COMMENT ON``, MariaDB ``COMMENT``) on the table and its columns; identifiers are
  split at camelCase and snake_case boundaries and words are stemmed (``invoices`` ->
  ``invoice``, ``countries`` -> ``country``);
* a question word scores ``idf(w)`` (``log(1 + N / df)``, ``df`` the number of tables that
  carry it in that field: names, columns and comments each have their own, so a word that
  is a column of hundreds of tables is still rare as a table name), times 3 in a table's
  name (times the square of the share of the name's words the question covers, so
  ``Invoice`` beats ``invoice_archive_2019`` for "invoices"), 0.5 in a column name, 1 in the
  table's comment, 0.5 in a column's comment; numbers score nothing (``top 5`` is not
  ``crm_campaign_log_5``);
* a table then gains half the best score among its foreign-key neighbours (either direction),
  so the join table between two mentioned tables rises with them, plus a tie-breaker of
  ``0.01`` per foreign key it takes part in (a catalog's central tables are its hubs);
* tables of one schema that share a column name few tables carry (at most 0.5 % of the
  catalog's tables or 8, whichever is more: ``state_name`` in defog's geography, not
  ``city`` or ``created_at``) are join partners and gain half the same way, only from the
  question's strongest schema (below): many catalogs declare no foreign keys (defog's do
  not), and a rare column name two tables share is how they join. On the 76 defog
  big-catalog questions
  (16 tables described each) the prompts show 650 instead of 402 tables of the question's
  own database, 435 instead of 686 distractors and 131 instead of 128 other databases'
  tables, with the same 113 of 121 gold tables (``bench/defog_big_recall.py``);
* in a catalog of several schemas, the tables outside the question's strongest schema (the
  sum of its three best table scores) count a quarter: a question is usually about one
  application's tables, and a catalog that keeps applications in schemas has same-named
  tables in several of them (defog's big catalog: ``academic.author`` and
  ``scholar.author``, ``geography.city`` and ``atis.city``), which the prompt would
  otherwise show side by side and the model join across. (A half, before: on the 75
  questions of the defog big-catalog pass the prompt described the same gold tables and 52 %
  instead of 43 % of its tables from the question's own database; ``bench/defog_big_recall.py``);
* run-together names are split where the catalog names both parts (``paperkeyphrase``), and
  irregular verb forms meet their table (``written`` -> ``write``, ``writes``): on the same
  75 questions, every gold table described in full for 69 instead of 65;
* a name word neither split can cut (PostgreSQL folds an unquoted ``sbCustomer`` to
  ``sbcustomer``: defog broker's tables and columns) is matched at its ends: a question word
  of 5 letters or more that begins or ends it, leaving 2 or more, counts half a name match
  ("customers", "price" for ``sbdailyprice``; not "order" for ``border``); and a hyphenated
  question word also counts run together ("check-ins": ``checkin``). On all 210 defog
  questions of the big catalog, every gold table is described for 203 instead of 198 (328
  instead of 319 of 335 gold tables; the hyphen alone: 200 and 321;
  ``bench/defog_big_recall.py --big bigwhole6 --own whole6``).

An inverted index keeps a question's cost proportional to the tables that share a word with
it, not to the catalog: at 10,000 tables a ranking takes milliseconds.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from .model import ColumnInfo, TableInfo

__all__ = ["Linker", "Linked", "LinkableTable", "link_words", "stem"]

NAME_WEIGHT = 3.0  # a question word in a table's name
COLUMN_WEIGHT = 0.5  # ... in one of its column names (many tables share generic columns)
OTHER_SCHEMA = 0.25  # a table outside the question's strongest schema (module doc)
SHARED_KEY_BONUS = 0.5  # share of a table's score its implicit join partners gain
SHARED_KEY_SHARE = 0.005  # a column name "rare" enough to be a join key: at most this share
SHARED_KEY_MIN = 8  # ... of the catalog's tables, or this many, carry it
GLUED_WEIGHT = 0.5  # share of a name match a question word gets as a run-together name's end
GLUED_MIN = 5  # ... when it has at least this many letters, and leaves at least 2 others

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# question words that name no table or column: they would only add noise to every score
_STOP = frozenset(
    """a an the of and or to in on at by for with from as is are was were be been do does did
    what which who whom whose how many much show list give find get return tell me their its
    his her our your each per every all any some most least top highest lowest first last
    than that this these those there have has had not no one two three five ten number
    count total""".split()
)


# Irregular verb forms questions use for what a table records ("papers written by", "who
# wrote", "items sold"): the plural stemmer cannot reach the table's word (``writes``).
_IRREGULAR = {
    "written": "write",
    "wrote": "write",
    "bought": "buy",
    "sold": "sell",
    "paid": "pay",
    "spent": "spend",
    "taught": "teach",
    "flown": "fly",
    "flew": "fly",
    "given": "give",
    "gave": "give",
    "taken": "take",
    "took": "take",
    "won": "win",
    "held": "hold",
    "sent": "send",
    "built": "build",
    "driven": "drive",
    "drove": "drive",
    "chosen": "choose",
    "chose": "choose",
    "kept": "keep",
    "made": "make",
    "ran": "run",
}


def stem(w: str) -> str:
    """A light English plural stemmer (``invoices`` -> ``invoice``, ``categories`` ->
    ``category``, ``boxes`` -> ``box``), lower case in, lower case out; irregular verb forms
    go to their base (``written`` -> ``write``, like ``writes``).

    Why not the prompt's old rule (strip ``es`` too): it cut ``invoices`` to ``invoic``,
    which no longer matched the table ``Invoice``."""
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith(("xes", "ches", "shes", "zes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def link_words(text: str) -> list[str]:
    """Stemmed lower-case words of an identifier or a question, in order (camelCase and
    snake_case split; one-letter words dropped)."""
    out: list[str] = []
    for chunk in re.split(r"[^A-Za-z0-9]+", text):
        for w in _CAMEL.findall(chunk) or ([chunk] if chunk else []):
            w = w.lower()
            if len(w) >= 2 or w.isdigit():  # ``measure_7``: the 7 tells columns apart
                out.append(stem(w))
    return out


def split_compounds(names: Sequence[set[str]], vocabulary: set[str]) -> list[set[str]]:
    """Each table's name words with run-together words split where the catalog itself names
    both parts: ``paperkeyphrase`` -> ``paper``, ``keyphrase`` (both tables of its schema).

    Why: PostgreSQL folds an unquoted ``PaperKeyphrase`` to lower case, and many schemas
    write join tables without separators, so the camelCase split has nothing to cut and a
    question about "papers and their keyphrases" reaches neither. Both parts must be words
    of ``vocabulary`` (the catalog's name and column words of four letters or more), so
    ordinary words stay whole (``keyphrase``: ``key`` is too short to be one,
    ``restaurant`` has no part that names anything)."""
    out = []
    for words in names:
        parts: set[str] = set()
        for w in words:
            for cut in range(4, len(w) - 3):
                head, tail = w[:cut], stem(w[cut:])
                if head in vocabulary and tail in vocabulary:
                    parts.update((head, tail))
                    break
            else:
                parts.add(w)
        out.append(parts)
    return out


_HYPHENATED = re.compile(r"\b([A-Za-z]+)-([A-Za-z]+)\b")


def _question_words(question: str) -> set[str]:
    """The question's link words, and each hyphenated compound also run together: the
    catalog spells "check-ins" as ``checkin`` and "e-mail" as ``email`` (schema names drop
    the hyphen), and neither part alone reaches the table's word."""
    joined = " ".join((a + b).lower() for a, b in _HYPHENATED.findall(question))
    return {w for w in link_words(f"{question} {joined}") if w not in _STOP}


class LinkableTable(Protocol):
    """What the linker needs of a table: where it is, its catalog entry, the columns shown."""

    @property
    def schema(self) -> str: ...

    @property
    def info(self) -> TableInfo: ...

    @property
    def columns(self) -> tuple[ColumnInfo, ...]: ...


T = TypeVar("T", bound=LinkableTable)


@dataclass(frozen=True)
class Linked(Generic[T]):
    """A table's link to a question: its score and the columns the question names, those
    whose words it covers best first."""

    table: T
    score: float
    columns: tuple[str, ...]


class Linker(Generic[T]):
    """A lexical index over ``tables``; :meth:`rank` orders them for one question.

    Build once per (catalog, role) and reuse: indexing 10,000 tables takes about a second,
    a ranking milliseconds (:func:`grid_sql.ask.budget.linker_for` caches it)."""

    def __init__(self, tables: Sequence[T]) -> None:
        self.tables = list(tables)
        n = len(self.tables)
        # per field: word -> tables carrying it (names, columns, comments); digits are kept
        # for telling columns apart (``measure_7``) but score no table (``top 5`` is not
        # ``crm_campaign_log_5``)
        self._names: dict[str, set[int]] = defaultdict(set)
        self._cols: dict[str, set[int]] = defaultdict(set)
        self._notes: dict[str, dict[int, float]] = defaultdict(dict)
        self._col_index: dict[tuple[str, int], set[str]] = defaultdict(set)
        self._name_words: list[set[str]] = []
        key_of: dict[tuple[str, str], int] = {}
        whole = [{w for w in link_words(t.info.name) if not w.isdigit()} for t in self.tables]
        vocabulary = {w for ws in whole for w in ws if len(w) >= 4}
        vocabulary |= {w for t in self.tables for c in t.columns for w in link_words(c.name)}
        vocabulary = {w for w in vocabulary if len(w) >= 4 and not w.isdigit()}
        split = split_compounds(whole, vocabulary)
        # run-together name words split_compounds could not cut (PostgreSQL folds an
        # unquoted ``sbCustomer`` to ``sbcustomer``): a question word may match their ends
        self._glued: dict[str, set[int]] = defaultdict(set)
        for i, (name, words) in enumerate(zip(split, whole, strict=True)):
            for w in words & name:
                if len(w) >= GLUED_MIN + 2:
                    self._glued[w].add(i)
        for i, (t, name) in enumerate(zip(self.tables, split, strict=True)):
            key_of[(t.schema, t.info.name)] = i
            self._name_words.append(name)
            for w in name | whole[i]:  # the run-together word still matches itself
                self._names[w].add(i)
            for c in t.columns:
                for w in set(link_words(c.name)):
                    self._col_index[(w, i)].add(c.name)
                    if not w.isdigit():
                        self._cols[w].add(i)
                for w in set(link_words(c.comment or "")):
                    self._col_index[(w, i)].add(c.name)
                    self._note(w, i, 0.5)
            for w in set(link_words(t.info.comment or "")):
                self._note(w, i, 1.0)

        def idf(index: Mapping[str, Sized]) -> dict[str, float]:
            return {w: math.log(1.0 + n / len(hits)) for w, hits in index.items()}

        self._idf_name, self._idf_col, self._idf_note = (
            idf(self._names),
            idf(self._cols),
            idf(self._notes),
        )
        self._multi_schema = len({t.schema for t in self.tables}) > 1
        self._neighbours: list[set[int]] = [set() for _ in self.tables]
        for i, t in enumerate(self.tables):
            for fk in t.info.foreign_keys:
                j = key_of.get((fk.referred_schema or t.schema, fk.referred_table))
                if j is not None and j != i:
                    self._neighbours[i].add(j)
                    self._neighbours[j].add(i)
        self._joins = self._shared_keys()

    def _shared_keys(self) -> list[set[int]]:
        """Per table, the tables of its schema that share a column name with it which at
        most ``max(SHARED_KEY_MIN, SHARED_KEY_SHARE * tables)`` tables of the catalog carry
        (module doc)."""
        by_col: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, t in enumerate(self.tables):
            for c in {c.name.lower() for c in t.columns}:
                by_col[(t.schema, c)].append(i)
        df: dict[str, int] = defaultdict(int)
        for (_, c), hits in by_col.items():
            df[c] += len(hits)
        cap = max(SHARED_KEY_MIN, int(len(self.tables) * SHARED_KEY_SHARE))
        out: list[set[int]] = [set() for _ in self.tables]
        for (_, c), hits in by_col.items():
            if len(hits) < 2 or df[c] > cap:
                continue
            for i in hits:
                out[i].update(j for j in hits if j != i)
        return out

    def _note(self, w: str, i: int, weight: float) -> None:
        if w.isdigit():
            return
        hits = self._notes[w]
        if hits.get(i, 0.0) < weight:
            hits[i] = weight

    def scores(self, question: str) -> dict[int, float]:
        """Score of every table that shares a word with ``question`` or neighbours one
        (table index -> score; absent tables score only their foreign-key tie-breaker)."""
        q = _question_words(question)
        base: dict[int, float] = defaultdict(float)
        name_part: dict[int, float] = defaultdict(float)
        name_hits: dict[int, int] = defaultdict(int)
        for w in q:
            for i in self._names.get(w, ()):
                name_part[i] += NAME_WEIGHT * self._idf_name[w]
                name_hits[i] += 1
            for i in self._cols.get(w, ()):
                base[i] += COLUMN_WEIGHT * self._idf_col[w]
            for i, weight in self._notes.get(w, {}).items():
                base[i] += weight * self._idf_note[w]
        for i, part in name_part.items():  # a name the question covers only in part counts less
            cover = name_hits[i] / len(self._name_words[i])
            base[i] += part * cover * cover
        for i, v in self._glued_hits(q).items():
            base[i] += v
        out = _spread(base, base, self._neighbours, 0.5)
        best = self._strongest_schema(out)
        # implicit joins: only the strongest schema's tables reach out
        reach = {i: v for i, v in base.items() if best is None or self.tables[i].schema == best}
        joined = _spread(out, reach, self._joins, SHARED_KEY_BONUS)
        if best is not None:
            for i in joined:
                if self.tables[i].schema != best:
                    joined[i] *= OTHER_SCHEMA
        return joined

    def _glued_hits(self, q: set[str]) -> dict[int, float]:
        """Tables whose run-together name word begins or ends with a question word of
        ``GLUED_MIN`` letters or more, two letters or more left over (``sbcustomer``:
        "customers"; ``sbdailyprice``: "price"; not ``border``: "order"), each match
        ``GLUED_WEIGHT`` of a name match, weighted by how few names it reaches."""
        out: dict[int, float] = defaultdict(float)
        words = [w for w in q if len(w) >= GLUED_MIN and not w.isdigit()]
        if not words or not self._glued:
            return out
        n = len(self.tables)
        for w in words:
            hits = {
                i
                for g, ids in self._glued.items()
                if len(g) >= len(w) + 2 and (g.startswith(w) or g.endswith(w))
                for i in ids
            }
            if hits:
                weight = GLUED_WEIGHT * NAME_WEIGHT * math.log(1.0 + n / len(hits))
                for i in hits:
                    out[i] += weight
        return out

    def _strongest_schema(self, scores: Mapping[int, float]) -> str | None:
        """The schema whose three best tables score most (None: one schema, or no score)."""
        if not self._multi_schema or not scores:
            return None
        per: dict[str, list[float]] = defaultdict(list)
        for i, v in scores.items():
            per[self.tables[i].schema].append(v)
        strength = {sch: sum(sorted(vs, reverse=True)[:3]) for sch, vs in per.items()}
        return max(sorted(strength), key=lambda sch: strength[sch])

    def rank(self, question: str) -> list[T]:
        """All tables, most relevant first (ties: more foreign keys, then catalog order)."""
        return [x.table for x in self.link(question)]

    def link(self, question: str) -> list[Linked[T]]:
        """All tables with their scores and matched columns, most relevant first."""
        s = self.scores(question)
        q = _question_words(question)
        order = sorted(
            range(len(self.tables)),
            key=lambda i: -(s.get(i, 0.0) + 0.01 * len(self._neighbours[i])),
        )
        out = []
        for i in order:
            hits: dict[str, int] = defaultdict(int)
            if i in s:
                for w in q:
                    for c in self._col_index.get((w, i), ()):
                        hits[c] += 1
            cols = sorted(hits, key=lambda c: (-hits[c] / max(len(link_words(c)), 1), -hits[c]))
            out.append(Linked(self.tables[i], s.get(i, 0.0), tuple(cols)))
        return out


def _spread(
    under: Mapping[int, float],
    sources: Mapping[int, float],
    near: Sequence[set[int]],
    share: float,
) -> dict[int, float]:
    """``under`` with each table raised by ``share`` of the best score among the
    ``sources`` it is ``near`` (one bonus per table, the largest: a hub gains no more for
    having many scored neighbours)."""
    out = dict(under)
    for i, v in sources.items():
        bonus = share * v
        for j in near[i]:
            if bonus > out.get(j, 0.0) - under.get(j, 0.0):
                out[j] = under.get(j, 0.0) + bonus
    return out


_CACHE: OrderedDict[tuple[str, ...], Linker[object]] = OrderedDict()  # type: ignore[type-var]
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 8


def cached_linker(key: tuple[str, ...], tables: Callable[[], Iterable[T]]) -> Linker[T]:
    """The linker of ``tables()`` under ``key`` (e.g. schema and policy fingerprints), built
    once: an Asker asks many questions of one catalog, and indexing a big one takes a second."""
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit  # type: ignore[return-value]
    linker = Linker(list(tables()))
    with _CACHE_LOCK:
        _CACHE[key] = linker  # type: ignore[assignment]
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return linker
