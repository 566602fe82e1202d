"""``grid-sql audit …``: verify, show and list audit records; export the store chain's head.

    grid-sql audit verify [ID ...|--all] [--head SEQ:HASH] [--db FILE|URL]
    grid-sql audit show ID [--step N] [--why TOKEN] [--db FILE|URL]
    grid-sql audit list [--limit N] [--db FILE|URL]
    grid-sql audit head [--db FILE|URL]

``verify`` checks the store chain and guards, then each record; it exits 0 when everything
verifies, 1 when anything is tampered with, divergent or not append-only, 3 when nothing is
but some record was sealed under an entry-id scheme this version cannot replay, 2 on a usage
or store error. Every command opens the store read-only: verifying never changes the
evidence (a missing guard is reported, not re-installed). ``--why`` takes a token id or a
text.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from ..errors import AuditError
from .explain import Explainer
from .store import AuditStore, default_path
from .verify import Verifier


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="grid-sql audit", description="Audit trail tools.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    db_help = f"audit store: a SQLite file or a SQLAlchemy URL (default {default_path()})"

    v = sub.add_parser("verify", help="replay records against the archive; report tampering")
    v.add_argument("ids", nargs="*", metavar="ID", help="audit ids (or unique prefixes)")
    v.add_argument("--all", action="store_true", help="verify every record in the store")
    v.add_argument(
        "--head",
        metavar="SEQ:HASH",
        help="a chain head kept elsewhere (`grid-sql audit head`): detects truncation",
    )
    v.add_argument("--db", help=db_help)

    s = sub.add_parser("show", help="a record, or what was allowed at one step and why")
    s.add_argument("id", metavar="ID")
    s.add_argument("--step", type=int, help="explain this step")
    s.add_argument("--why", help="token id or text: why was it blocked at --step")
    s.add_argument("--db", help=db_help)

    ls = sub.add_parser("list", help="sealed records, oldest first")
    ls.add_argument("--limit", type=int, default=None, help="only the last N records")
    ls.add_argument("--db", help=db_help)

    h = sub.add_parser("head", help="the store chain's head, to keep where writers cannot reach")
    h.add_argument("--db", help=db_help)
    return ap


def _when(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // 1_000_000_000)) + "Z"


def _show(store: AuditStore, audit_id: str, out: TextIO) -> None:
    rec = store.get(audit_id)
    seal = rec.seal
    if rec.kind == "statement":
        print(f"audit id    {rec.audit_id}", file=out)
        print("kind        hand-written statement (run_sql)", file=out)
        print(f"user        {seal.get('user') or '-'}", file=out)
        print(f"time        {_when(int(seal['sealed_at_ns']))}", file=out)
        print(f"sql         {seal.get('final_sql')}", file=out)
        chk = seal.get("checker") or {}
        verdict = "passed" if chk.get("passed") else "; ".join(chk.get("violations") or [])
        print(f"checker     {verdict}", file=out)
        arts_d = seal.get("artifacts") or {}
        for name in ("policy", "schema"):
            print(f"{name:<11} {arts_d.get(name) or '-'}", file=out)
        print(f"engine      {seal.get('engine') or '-'}", file=out)
        return
    arts = rec.artifacts
    print(f"audit id    {rec.audit_id}", file=out)
    print(f"question    {seal.get('question')!r}", file=out)
    if seal.get("previous"):  # a conversation turn: the turn whose question/SQL it followed
        print(f"follows     {seal['previous']}", file=out)
    print(f"user        {seal.get('user') or '-'}", file=out)
    print(
        f"time        {_when(int(seal['started_at_ns']))} → {_when(int(seal['sealed_at_ns']))}",
        file=out,
    )
    flags = ", ".join(seal.get("flags") or []) or "none"
    print(
        f"stop        {seal.get('stop_reason')} (mode {seal.get('mode')}, flags {flags})",
        file=out,
    )
    print(f"sql         {seal.get('final_sql')}", file=out)
    print(f"model       {arts.model_id or '-'}", file=out)
    scheme = seal.get("entry_scheme")
    print(
        f"engine      {seal.get('engine') or '-'} (entry-id scheme "
        f"{scheme if scheme is not None else 'not named: sealed before seals named it'})",
        file=out,
    )
    for name, fp in (
        ("grammar", arts.grammar),
        ("tokenizer", arts.tokenizer),
        ("policy", arts.policy),
        ("schema", arts.schema),
    ):
        print(f"{name:<11} {fp or '-'}", file=out)
    vocab = None
    try:
        vocab = Verifier(store).vocab(arts.tokenizer)
    except AuditError as e:
        print(f"(token spellings unavailable: {e})", file=out)
    print(f"\n{'step':>5} {'kind':<8} {'allowed':>8} {'blocked':>8}  token", file=out)
    for st in rec.steps:
        if vocab is not None and 0 <= st.token < vocab.size:
            spelled = "EOS" if st.token == vocab.eos_token_id else repr(vocab.token_bytes[st.token])
        else:
            spelled = ""
        # a step decided without a mask (a checked favourite, the checked EOS tail) counts
        # nothing: shown as "-", not as 0 allowed
        masked = bool(st.mask_digest)
        allowed, blocked = (st.allowed, st.blocked) if masked else ("-", "-")
        row = f"{st.step:>5} {st.kind:<8} {allowed:>8} {blocked:>8}  {st.token} {spelled}"
        print(row, file=out)


def audit_main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Entry point of ``grid-sql audit``; returns the process exit code."""
    out = out if out is not None else sys.stdout
    args = _parser().parse_args(list(argv) if argv is not None else None)
    try:
        store = AuditStore(args.db, readonly=True)
    except AuditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "head":
            head = store.head()
            print(head if head is not None else "(empty chain)", file=out)
            return 0
        if args.cmd == "verify":
            if args.all == bool(args.ids):
                print("error: give audit ids or --all (not both)", file=sys.stderr)
                return 2
            verifier = Verifier(store)
            chain = verifier.verify_store(args.head)
            ids = store.ids() if args.all else [store.resolve(i) for i in args.ids]
            bad = unreplayable = 0
            for i in ids:
                rep = verifier.verify(i)
                bad += rep.tampered
                unreplayable += bool(rep.not_replayable) and not rep.tampered
                print(rep.describe(), file=out)
            print(chain.describe(), file=out)
            good = len(ids) - bad - unreplayable
            line = f"{good}/{len(ids)} record(s) verified"
            if unreplayable:
                line += f", {unreplayable} not replayable by this version"
            print(line + ("" if chain.ok else "; the store chain FAILED"), file=out)
            if bad or not chain.ok:
                return 1
            return 3 if unreplayable else 0
        if args.cmd == "show":
            if args.why is not None and args.step is None:
                print("error: --why needs --step N", file=sys.stderr)
                return 2
            if args.step is None:
                _show(store, args.id, out)
            else:
                print(Explainer(store).step(args.id, args.step, args.why), file=out)
            return 0
        if args.cmd == "list":
            rows = list(store.iter_seals())
            if args.limit is not None:
                rows = rows[-args.limit :] if args.limit > 0 else []
            for audit_id, seal in rows:
                what = seal.get("stop_reason") or seal.get("kind") or "-"
                print(
                    f"{audit_id[:16]}  {_when(int(seal['sealed_at_ns']))}  "
                    f"{seal.get('user') or '-':<10} {seal.get('n_steps'):>4} steps  "
                    f"{what:<14} {str(seal.get('final_sql'))[:70]}",
                    file=out,
                )
            return 0
    except AuditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        store.close()
    return 2
