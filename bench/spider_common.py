"""Spider harness basics shared by ``bench/spider_eval.py`` and its report: the question
sets, the read-only SQLite executor, the EX comparator, Wilson intervals and the JSONL records.

Split out of ``spider_eval.py`` (issue #24: no module over 800 lines); ``spider_eval`` re-exports
every name, so ``import spider_eval as se; se.results_match`` keeps working in the other
bench scripts.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import random
import re
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPIDER_DIR = Path("/work/shared/data/spider")
CHINOOK_QUESTIONS = Path(__file__).resolve().parent / "chinook_questions.json"
ARMS = ("unconstrained", "constrained", "repair", "scope", "scope+repair", "bind", "bind+repair")
# Deterministic autofix (issue #8 §1), both on the recorded ``scope`` first round of the same
# --out file (greedy: a re-run would spell the same statement): the model runs only where
# autofix leaves a refusal. ``autofix+repair`` repairs the statement as generated;
# ``partial-autofix+repair`` first applies the certain edits when only some violations
# have one, and repairs the partly fixed statement.
AUTOFIX_ARMS = ("autofix+repair", "partial-autofix+repair")
DEFAULT_ARMS = ("unconstrained", "constrained", "repair")
# (first-round arm, final arm, scope-aware masks: "" off, "scope" the scope rule as
# measured before select-list obligations, "bind" with them): each pair is one
# generate_sql call
ARM_PAIRS = (
    ("constrained", "repair", ""),
    ("scope", "scope+repair", "scope"),
    ("bind", "bind+repair", "bind"),
)
# Asker keywords that may turn the scope-aware identifier masks on or off (issue #8 §2); the
# first one the Asker accepts is used, else the bench sets the role grammar's scopes itself
SCOPE_OPTIONS = ("scope_masks", "scopes", "scope_aware", "scoped")
EXCLUDED_DBS = frozenset({"wta_1"})
FLOAT_DIGITS = 7
EXEC_TIMEOUT_S = 20.0
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z]*\s*(.*?)(?:```|$)", re.DOTALL)


# --------------------------------------------------------------------------- questions
@dataclass(frozen=True)
class Question:
    """One question: ``qid`` is its index in ``dev.json`` (or its id in the Chinook file).

    ``db`` is the SQLite file for questions outside Spider's directory layout.
    """

    qid: int
    db_id: str
    question: str
    gold: str
    db: Path | None = None

    def db_path(self, spider_dir: Path) -> Path:
        if self.db is not None:
            return self.db
        return spider_dir / "database" / self.db_id / f"{self.db_id}.sqlite"


def load_questions(spider_dir: Path = SPIDER_DIR) -> list[Question]:
    """Every dev question whose SQLite database is present."""
    dev = json.loads((spider_dir / "dev.json").read_text(encoding="utf-8"))
    out = []
    for i, e in enumerate(dev):
        q = Question(i, e["db_id"], e["question"], e["query"])
        if q.db_id not in EXCLUDED_DBS and q.db_path(spider_dir).is_file():
            out.append(q)
    return out


def load_chinook_questions(path: Path = CHINOOK_QUESTIONS) -> list[Question]:
    """The Chinook business questions, bound to the packaged ``Chinook_Sqlite.sqlite``."""
    from grid_sql.data import chinook_path

    db = chinook_path()
    doc = json.loads(path.read_text(encoding="utf-8"))
    qs = [Question(int(e["id"]), "chinook", e["question"], e["gold"], db) for e in doc["questions"]]
    if len({q.qid for q in qs}) != len(qs):
        raise SystemExit(f"{path}: duplicate question ids")
    return qs


def select_questions(
    questions: Sequence[Question], *, n: int | None, seed: int, ids: Sequence[int] | None
) -> list[Question]:
    """``ids`` in the given order, else the first ``n`` of a ``Random(seed)`` shuffle."""
    if ids:
        by_id = {q.qid: q for q in questions}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise SystemExit(f"no such (executable) dev question id(s): {missing}")
        return [by_id[i] for i in ids]
    order = list(questions)
    random.Random(seed).shuffle(order)
    return order if n is None else order[:n]


# --------------------------------------------------------------------------- execution
class ExecError(Exception):
    """A statement failed to run (syntax, unknown name, timeout, several statements)."""


def run_sqlite(db: Path, sql: str, timeout_s: float = EXEC_TIMEOUT_S) -> list[tuple[Any, ...]]:
    """All rows of ``sql`` on a read-only handle of ``db``; :class:`ExecError` on failure."""
    con = sqlite3.connect(f"file:{db.resolve()}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    deadline = time.monotonic() + timeout_s
    con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        con.execute("PRAGMA query_only = ON")
        return [tuple(r) for r in con.execute(sql).fetchall()]
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError) as exc:
        raise ExecError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        con.close()


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return repr(v)
        r = float(f"{v:.{FLOAT_DIGITS}g}")
        return int(r) if r.is_integer() else r
    if isinstance(v, bytes):
        return v.hex()
    return v


def _norm_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(_norm(v) for v in r) for r in rows]


def results_match(
    gold: Sequence[Sequence[Any]],
    pred: Sequence[Sequence[Any]],
    *,
    ordered: bool,
    any_column_order: bool = False,
) -> bool:
    """Execution-accuracy comparison: equal row lists if ``ordered``, else equal multisets.

    Floats are compared to ``FLOAT_DIGITS`` significant digits (``AVG`` computed two ways
    differs in the last bits), and an integral float equals the integer (``3.0 == 3``).
    ``any_column_order``: equal for some permutation of the predicted columns (a column can
    only go where the gold column holds the same multiset of values, which keeps the search
    small).
    """
    g, p = _norm_rows(gold), _norm_rows(pred)

    def same(q: list[tuple[Any, ...]]) -> bool:
        return g == q if ordered else Counter(g) == Counter(q)

    ok = same(p)
    if ok or not any_column_order:
        return ok
    if len(g) != len(p) or not g or len({len(r) for r in g + p}) != 1:
        return False
    width = len(g[0])
    gcols = [Counter(r[i] for r in g) for i in range(width)]
    pcols = [Counter(r[i] for r in p) for i in range(width)]
    places = [[j for j in range(width) if pcols[j] == gcols[i]] for i in range(width)]
    for perm in itertools.product(*places):
        if len(set(perm)) == width and same([tuple(r[j] for j in perm) for r in p]):
            return True
    return False


def gold_is_ordered(gold_sql: str) -> bool:
    """Order matters only when the gold query sorts (Spider's own convention)."""
    return bool(_ORDER_BY.search(gold_sql))


def extract_sql(text: str) -> str:
    """The statement in an unconstrained completion: fence stripped, cut after the first ``;``."""
    m = _FENCE.search(text)
    body = m.group(1) if m else text
    cut = body.find(";")
    return (body[: cut + 1] if cut >= 0 else body).strip()


# --------------------------------------------------------------------------- statistics
def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval for k successes out of n (0..1)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


# --------------------------------------------------------------------------- JSONL
def record_files(path: Path) -> list[Path]:
    """The files that hold ``path``'s records, in reading order. Committed records are kept
    gzip-compressed (``X.jsonl.gz``, bench/README.md) while runs append to plain ``X.jsonl``
    (git-ignored), so a path names both: the compressed records first, then any appended
    after them (the last record per question and arm wins everywhere). A ``.gz`` path is read
    as given."""
    if path.suffix == ".gz":
        return [path] if path.is_file() else []
    gz = path.with_name(path.name + ".gz")
    return [p for p in (gz, path) if p.is_file()]


def read_text_records(path: Path) -> str:
    """The text of one record file, decompressed if it is ``.gz``."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a results file (and of its committed ``.gz`` form, ``record_files``); a torn
    last line (a killed run) is ignored."""
    out = []
    for p in record_files(path):
        for line in read_text_records(p).splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Replace ``path`` with ``records`` (gzip for a ``.gz`` path: no timestamp in the header,
    so equal records give equal bytes)."""
    data = "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")
    if path.suffix == ".gz":
        with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
            f.write(data)
    else:
        path.write_bytes(data)


def append_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
        f.flush()


def done_keys(records: Iterable[dict[str, Any]], model: str) -> set[tuple[int, str]]:
    return {(r["qid"], r["arm"]) for r in records if r.get("model") == model}


def git_commit(repo: Path | None = None) -> str:
    """The short hash of ``HEAD`` of the checkout ``grid_sql`` is imported from (``+dirty``
    when its grid_sql/ has uncommitted changes): the code that was measured."""
    import grid_sql

    root = repo or Path(grid_sql.__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "grid_sql"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")
