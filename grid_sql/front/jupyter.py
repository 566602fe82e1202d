"""Jupyter front: ``%load_ext grid_sql``, ``%grid_connect``, ``%ask`` and ``%%ask``.

::

    %load_ext grid_sql
    %grid_connect sqlite:///chinook.sqlite --model smollm2-135m --policy analyst.yaml
    %grid_connect chinook.sqlite --examples few_shot.json   # optional few-shot pairs
    %ask top 5 customers by revenue

    %%ask --out top
    Which five customers spent the most?

    %%ask --plot
    Total revenue per country

``--plot`` shows the chart that suits the answer (a bar for category × number, a line for
time × number; :meth:`AskResult.plot`) above the table, or the reason there is none. In a
notebook kernel the SQL appears while it is generated (a display updated as tokens arrive,
``grid_sql.front.jupyter_live``); the result replaces it.

Successive questions are the turns of one conversation (:mod:`grid_sql.ask.conversation`):
a follow-up ("only those in Brazil") is generated with the earlier questions and SQL;
``%ask --new ...`` starts a new one.

A ``%ask`` *line* must not end in ``?``: IPython turns such a line into a help request before
any magic sees it; ``%%ask`` cells are passed as they are.

The magics return the :class:`~grid_sql.ask.result.AskResult`, which the notebook renders as
HTML (the SQL highlighted, the table, a one-line audit summary); ``--df`` returns a DataFrame
instead. Why a connection held by the extension: building an Asker (model load, catalog read,
grant read, grammar and guide compilation) is the expensive part, so ``%grid_connect`` does it
once and every question after that reuses it. This module imports IPython; ``import grid_sql``
does not import it (``grid_sql.load_ipython_extension`` imports this module lazily).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

from ..ask.prompt import Example
from ..ask.result import AskResult
from ..errors import PolicyRefusal

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..ask.asker import Asker
    from ..ask.conversation import Conversation

__all__ = ["GridMagics", "load_ipython_extension"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as IPython UsageErrors instead of exiting the kernel."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise UsageError(message or self.format_help())


def _connect_parser() -> _Parser:
    p = _Parser(prog="%grid_connect", add_help=True)
    p.add_argument("url", help="database URL (sqlite:///file, postgresql+psycopg://...) or path")
    p.add_argument("--model", "-m", default=None, help="model name or GGUF path")
    p.add_argument("--policy", "-p", default=None, help="application policy file (yaml/toml/json)")
    p.add_argument("--audit", default=None, help="audit store (SQLite file)")
    p.add_argument("--user", default=None, help="end user recorded in the audit seal")
    p.add_argument("--row-limit", type=int, default=None, help="row cap per answer")
    p.add_argument("--timeout", type=float, default=None, help="statement timeout, seconds")
    p.add_argument("--max-tokens", type=int, default=None, help="generation budget")
    p.add_argument("--allow-writes", action="store_true", help="run granted writes")
    p.add_argument(
        "--examples", default=None, help="few-shot pairs: a .json/.yaml list of {question, sql}"
    )
    return p


def _ask_parser(prog: str) -> _Parser:
    p = _Parser(prog=prog, add_help=True)
    p.add_argument("--out", "-o", default=None, help="also store the result in this variable")
    p.add_argument("--df", action="store_true", help="return a pandas DataFrame")
    p.add_argument(
        "--new", action="store_true", help="start a new conversation (forget earlier questions)"
    )
    p.add_argument(
        "--plot", action="store_true", help="show the chart that suits the result (or why none)"
    )
    return p


@magics_class
class GridMagics(Magics):
    """The grid-sql magics; the Asker made by ``%grid_connect`` is kept on this object."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.asker: Asker | None = None
        self.conversation: Conversation | None = None  # %ask questions are its turns
        # show the SQL as it is generated (a display updated per token): on by default in a
        # notebook kernel, whose front end redraws an updated display in place; a terminal
        # IPython would print every update, so there it is off
        self.live: bool = getattr(shell, "kernel", None) is not None

    @line_magic
    def grid_connect(self, line: str) -> None:
        """``%grid_connect URL [--model M] [--policy FILE] [--audit FILE] [--user NAME]
        [--row-limit N] [--timeout S] [--max-tokens N] [--allow-writes]``"""
        args = _connect_parser().parse_args(shlex.split(line))
        from ..ask.asker import Asker

        opts: dict[str, Any] = {"model": args.model, "policy": args.policy}
        for key, value in (
            ("audit", args.audit),
            ("user", args.user),
            ("row_limit", args.row_limit),
            ("timeout_s", args.timeout),
            ("max_tokens", args.max_tokens),
        ):
            if value is not None:
                opts[key] = value
        if args.allow_writes:
            opts["allow_writes"] = True
        if args.examples is not None:
            opts["examples"] = load_examples(args.examples)
        self.asker = Asker(args.url, **opts)
        self.conversation = self.asker.conversation()
        print(f"grid-sql connected: {_shown(args.url)}")

    @line_cell_magic
    def ask(self, line: str, cell: str | None = None) -> Any:
        """``%ask [--out VAR] [--df] QUESTION`` or ``%%ask [--out VAR] [--df]`` with the question
        as the cell."""
        if cell is None:
            opts, question = _leading_options(line)
            return self._answer(question, _ask_parser("%ask").parse_args(opts))
        args = _ask_parser("%%ask").parse_args(shlex.split(line))
        return self._answer(cell.strip(), args)

    def _answer(self, question: str, args: argparse.Namespace) -> Any:
        if self.asker is None or self.conversation is None:
            raise UsageError("no database: run %grid_connect URL [--model M] first")
        if not question:
            raise UsageError("%ask needs a question (on the line, or as the %%ask cell)")
        if args.new:
            self.conversation.reset()
        # each question is the next turn: a follow-up sees the earlier questions and SQL
        try:
            if self.live:
                from .jupyter_live import answer_live

                result: AskResult = answer_live(self.conversation, question)
            else:
                result = self.conversation.ask(question)
        except PolicyRefusal as exc:  # the reason, not a traceback: nothing was executed
            print(exc.plain())
            return None
        if args.plot:
            result.show_chart = True  # the HTML view embeds the chart, or says why there is none
            if args.df:
                from .jupyter_live import show_chart

                show_chart(result)
        value: Any = result.to_dataframe() if args.df else result
        if args.out and self.shell is not None:
            self.shell.user_ns[args.out] = value
        return value


def load_examples(path: str) -> list[Example]:
    """Few-shot pairs from a JSON or YAML file: a list of ``{question: ..., sql: ...}``."""
    text = Path(path).expanduser().read_text(encoding="utf-8")
    if path.endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, list) or not all(
        isinstance(d, dict) and isinstance(d.get("question"), str) and isinstance(d.get("sql"), str)
        for d in data
    ):
        raise UsageError(f"{path}: expected a list of {{question: ..., sql: ...}} pairs")
    return [Example(d["question"], d["sql"]) for d in data]


def _leading_options(line: str) -> tuple[list[str], str]:
    """Split ``--df`` / ``--out NAME`` off the front of a ``%ask`` line; the rest is the question.

    Not shlex: a question may hold an apostrophe ("What's ...") that is no quote.
    """
    words = line.split()
    opts: list[str] = []
    while words and words[0].startswith("-"):
        flag = words.pop(0)
        opts.append(flag)
        if flag in ("--out", "-o") and words:
            opts.append(words.pop(0))
    return opts, " ".join(words)


def _shown(url: str) -> str:
    """The URL with its password masked (for the connect message)."""
    if "://" not in url:
        return url
    import sqlalchemy as sa

    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (``%load_ext grid_sql``)."""
    ipython.register_magics(GridMagics)
