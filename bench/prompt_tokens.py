"""Prompt length in model tokens over a Spider sample, with and without example values.

The Asker's chat messages for each question (system rules + schema, then the question; the
chat template itself excluded) are tokenized with the model's own GGUF tokenizer
(llama.cpp, ``vocab_only``: no weights loaded). This is the figure behind "the prompt grows
from a mean 302 to 579 tokens" in bench/RESULTS-spider.md §10.

    python bench/prompt_tokens.py --n 150 --example-values 0 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spider_eval as se  # noqa: E402

DEFAULT_GGUF = Path.home() / ".cache/grid-sql/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--example-values", type=int, nargs="+", default=[0, 3])
    ap.add_argument("--gguf", type=Path, default=DEFAULT_GGUF, help="tokenizer source")
    args = ap.parse_args(argv)
    from llama_cpp import Llama

    from grid_sql.ask.asker import Asker

    llm = Llama(model_path=str(args.gguf), vocab_only=True, verbose=False)
    qs = se.select_questions(se.load_questions(), n=args.n, seed=args.seed, ids=None)
    askers: dict[tuple[str, int], Asker] = {}
    for k in args.example_values:
        counts = []
        for q in qs:
            db = q.db_path(se.SPIDER_DIR)
            a = askers.get((str(db), k))
            if a is None:
                a = askers[(str(db), k)] = Asker(db, audit=False, example_values=k)
            text = "\n".join(m["content"] for m in a.messages(q.question))
            counts.append(len(llm.tokenize(text.encode(), add_bos=False)))
        print(
            f"example_values={k}: {len(counts)} prompts, tokens mean {statistics.mean(counts):.0f}"
            f" median {statistics.median(counts):.0f} max {max(counts)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
