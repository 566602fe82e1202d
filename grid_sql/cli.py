"""``grid-sql``: ask a database in plain language, run the demo, inspect audits and policies.

    grid-sql ask "question" --db URL [--model M] [--policy FILE] [--json] [--allow-writes]
                                     [--max-rows N] [--timeout S] [--max-tokens N]
                                     [--n-ctx N] [--threads N] [--n-gpu-layers N] [--device D]
                                     [--yes] [--dry-run]
    grid-sql chat --db URL [--model M] [--policy FILE] [--allow-writes] [--yes] [--json]
    grid-sql demo [--model M] [--question Q ...] [--masks]
    grid-sql audit ...                 (see ``grid-sql audit --help``)
    grid-sql policy explain --db URL [--policy FILE]
    grid-sql models fetch|list|verify [NAME ...]

Why ``--json`` prints one object even on failure: scripts should parse one shape and branch on
``error`` rather than scrape stderr; the exit status is non-zero whenever ``error`` is set.
Progress bars go to stderr (and only to a terminal), so stdout stays the answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .errors import GridSQLError, MaskError, PolicyRefusal
from .front.console import (  # noqa: F401 - re-exported: grid_sql.cli's public helpers
    EXIT_ERROR,
    EXIT_USAGE,
    error_payload,
    format_table,
    print_result,
    progress,
    token_progress,
)


# ---------------------------------------------------------------------- commands
def _add_db_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="SQLAlchemy URL or a SQLite file path")
    p.add_argument("--policy", help="application policy file (.yaml/.toml/.json) narrowing grants")


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """``--n-ctx``, ``--threads``, ``--n-gpu-layers``, ``--device`` (default: the
    ``GRID_SQL_*`` environment, then the backend's own; ``grid_sql.decode.options``)."""
    p.add_argument(
        "--n-ctx",
        type=int,
        metavar="N",
        help="context window in tokens (env GRID_SQL_N_CTX; default 4096); the prompt "
        "shrinks to fit it",
    )
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="CPU threads (env GRID_SQL_N_THREADS; default: CPUs, at most 8)",
    )
    p.add_argument(
        "--n-gpu-layers",
        type=int,
        metavar="N",
        help="llama.cpp: layers offloaded to the GPU, -1 all (env GRID_SQL_N_GPU_LAYERS; "
        "needs a GPU build of llama-cpp-python)",
    )
    p.add_argument(
        "--device",
        help="transformers: torch device, e.g. cuda (env GRID_SQL_DEVICE; default cpu)",
    )


def _ask(a: argparse.Namespace) -> int:
    from .ask.asker import Asker, check_question

    try:
        check_question(a.question)  # before connecting or loading anything
        asker = Asker(
            a.db,
            model=a.model,
            policy=a.policy,
            audit=False if a.no_audit else a.audit,
            user=a.user,
            allow_writes=a.allow_writes,
            row_limit=a.max_rows,
            timeout_s=a.timeout,
            max_tokens=a.max_tokens,
            repair=not a.no_repair,
            example_values=a.example_values,
            n_ctx=a.n_ctx,
            n_threads=a.threads,
            n_gpu_layers=a.n_gpu_layers,
            device=a.device,
        )
        with progress("loading model"):
            _ = asker.backend
        if sys.stdout.isatty() and not a.json:  # the SQL appears as it is generated
            from .front.chat import echo_stream

            res = echo_stream(asker.stream(a.question, dry_run=a.allow_writes), sys.stdout)
        else:
            with token_progress(a.max_tokens) as on_step:
                res = asker.ask(a.question, on_step=on_step, dry_run=a.allow_writes)
        if res.preview is not None:  # a write: previewed, then run only when confirmed
            from .front.chat import commit_previewed, confirm, print_preview

            info = sys.stderr if a.json else sys.stdout
            print(f"SQL: {res.sql}", file=info)
            print_preview(res, info)
            if not a.dry_run and confirm("Run it?", yes=a.yes, stdin=sys.stdin, out=info):
                res = commit_previewed(asker, res, a.max_rows, a.timeout)
    except GridSQLError as exc:
        if a.json:
            print(json.dumps(error_payload(exc, a.question)))
        elif isinstance(exc, PolicyRefusal):  # an answer, not a fault: the reason, plainly
            print(exc.plain(), file=sys.stderr)
        elif isinstance(exc, MaskError):  # an engine invariant, not the user's input
            print(
                f"error (MaskError): grid-sql could not finish the statement it was writing "
                f"({exc}); nothing was executed. This is a grid-sql defect: please report it "
                "with the question.",
                file=sys.stderr,
            )
        else:
            print(f"error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return EXIT_ERROR
    if a.json:
        print(json.dumps(res.to_dict()))
    else:
        print_result(res, sys.stdout)
    return 0


def _add_write_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--yes", action="store_true", help="run a previewed write without asking (scripts)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="preview writes only: roll back, never run them"
    )


def _chat(a: argparse.Namespace) -> int:
    from .front.chat import chat_main

    return chat_main(a)


def _demo(a: argparse.Namespace) -> int:
    from .front import demo

    if a.masks:
        return demo.masks_main([] if a.vocab is None else ["--vocab", a.vocab])
    return demo.run(model=a.model, questions=a.question or None, audit=a.audit)


def _policy(a: argparse.Namespace) -> int:
    from .ask.asker import Asker

    try:
        asker = Asker(a.db, policy=a.policy, audit=False)
        print(asker.explain_policy())
    except GridSQLError as exc:
        print(f"error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="grid-sql",
        description="Plain-language questions to SQL that is valid and policy-compliant "
        "by construction, executed safely, with a per-token audit trail.",
    )
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")

    p = sub.add_parser("ask", help="answer one question on a database")
    p.add_argument("question")
    _add_db_args(p)
    p.add_argument("--model", help="registry name, GGUF path, HF directory or hub id")
    p.add_argument("--json", action="store_true", help="print one JSON object (error included)")
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="run writing statements the role is granted (default: read only)",
    )
    p.add_argument("--max-rows", type=int, default=1000, help="row cap (default 1000)")
    p.add_argument("--timeout", type=float, default=30.0, help="statement timeout, seconds")
    p.add_argument("--max-tokens", type=int, default=256, help="generation budget in tokens")
    p.add_argument("--user", help="user name recorded in the audit seal (default: the role)")
    p.add_argument("--audit", help="audit store: SQLite path or SQLAlchemy URL (default store)")
    p.add_argument("--no-audit", action="store_true", help="do not record the generation")
    p.add_argument("--no-repair", action="store_true", help="no checker-guided repair round")
    p.add_argument(
        "--example-values",
        type=int,
        default=0,
        metavar="K",
        help="show K distinct values of each short text column in the prompt (data: opt-in)",
    )
    add_backend_args(p)
    _add_write_args(p)
    p.set_defaults(func=_ask)

    c = sub.add_parser("chat", help="a conversation: follow-up questions at a prompt")
    _add_db_args(c)
    c.add_argument("--model", help="registry name, GGUF path, HF directory or hub id")
    c.add_argument("--json", action="store_true", help="one JSON object per answer")
    c.add_argument(
        "--allow-writes",
        action="store_true",
        help="writing statements the role is granted: previewed, then run when confirmed",
    )
    c.add_argument("--max-rows", type=int, default=1000, help="row cap (default 1000)")
    c.add_argument("--timeout", type=float, default=30.0, help="statement timeout, seconds")
    c.add_argument("--max-tokens", type=int, default=256, help="generation budget in tokens")
    c.add_argument("--audit", help="audit store: SQLite path or SQLAlchemy URL (default store)")
    c.add_argument("--no-audit", action="store_true", help="do not record the generations")
    _add_write_args(c)
    c.set_defaults(func=_chat)

    d = sub.add_parser("demo", help="Chinook (packaged) + the default local model")
    d.add_argument("--model", help="any other model (registry name, GGUF path, ...)")
    d.add_argument("--question", action="append", help="ask this instead (repeatable)")
    d.add_argument("--audit", help="audit store (default store)")
    d.add_argument(
        "--masks",
        action="store_true",
        help="model-free: walk a statement printing exact mask sizes",
    )
    d.add_argument("--vocab", help="GGUF vocabulary for --masks")
    d.set_defaults(func=_demo)

    sub.add_parser(
        "audit", help="show / verify / list audit records (grid-sql audit --help)", add_help=False
    )
    pol = sub.add_parser("policy", help="explain the connected role's effective policy")
    psub = pol.add_subparsers(dest="policy_cmd", required=True, metavar="SUBCOMMAND")
    pe = psub.add_parser("explain", help="what the role may do, in words")
    _add_db_args(pe)
    pe.set_defaults(func=_policy)
    sub.add_parser("models", help="fetch / list / verify the offline models", add_help=False)
    sub.add_parser(
        "serve", help="OpenAI-compatible test server, local model (serve --help)", add_help=False
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # audit and models keep their own parsers: pass everything after the word through
    if args and args[0] == "audit":
        from .audit import audit_main

        return audit_main(args[1:])
    if args and args[0] == "models":
        from .decode.models_cli import main as models_main

        return models_main(args[1:])
    if args and args[0] == "serve":
        from .serve.server import main as serve_main

        return serve_main(args[1:])
    ap = _parser()
    try:
        a = ap.parse_args(args)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if a.cmd is None:
        ap.print_help(sys.stderr)
        return EXIT_USAGE
    code: int = a.func(a)
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
