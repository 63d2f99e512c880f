# kplane: `make up` runs a cluster, `make test` runs every test CI runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install mypyc up down test test-unit lint typecheck bench bench-compare chaos proto proto-check compose image clean

install: $(STAMP) mypyc

$(STAMP): pyproject.toml tools/install_etcd.sh tools/install_compose.sh tools/install_chromium.sh tools/apt_install.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	VENV=$(VENV) sh tools/install_etcd.sh
	sh tools/install_compose.sh
	sh tools/install_chromium.sh
	touch $(STAMP)

# machinery.COMPILED's modules compiled with mypyc (tools/build_mypyc.py, docs/performance.md), again
# when one of them, the script or the venv changed. Without a C compiler or on a failed build: one
# line, no stamp, and the pure-Python modules. KPLANE_PURE_PYTHON=1 runs the .py files instead.
mypyc: $(STAMP)
	$(BIN)/python tools/build_mypyc.py --if-stale

up: install
	$(BIN)/kplane up

down: install
	$(BIN)/kplane down

test: install proto-check lint typecheck
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

# ruff (E, F, I, B; pyproject.toml [tool.ruff]) over every module but the generated machinery/api;
# every commit subject since tools/check_commits.py's BASELINE at most 72 characters, `area: what`.
lint: install
	$(BIN)/ruff check .
	$(BIN)/python tools/check_commits.py

# mypy over every package but tests/ (pyproject.toml [tool.mypy]: strict for machinery/ and the
# scheduler framework, default elsewhere).
typecheck: install
	$(BIN)/mypy

test-unit: install
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit

# KPLANE_EVENT_LOOP=asyncio|uvloop make bench: every process on that loop (default: uvloop for the
# apiserver and the hollow nodes, asyncio's for the rest; machinery/process.py).
bench: install
	$(BIN)/python -m bench

# make bench-compare BASE=dir [HEAD=dir]: each figure of two runs, head / base, as measured and in the
# reference units (docs/testing.md); HEAD defaults to .bench, the latest `make bench`.
bench-compare: install
	$(if $(BASE),,$(error BASE=dir of an earlier run is required))
	$(BIN)/python -m bench --compare $(BASE) $(HEAD)

# Seeded chaos over every profile in turn, ten minutes in all, each on a cluster of its own
# (docs/chaos.md): prints operations, faults, revisions checked and the seed; SEED=N repeats a run.
CHAOS_SECONDS ?= 600
chaos: install
	$(BIN)/kplane --data-dir .kplane/chaos chaos --each-profile --duration $(CHAOS_SECONDS) $(if $(SEED),--seed $(SEED))

proto: install
	$(BIN)/python tools/gen_protos.py

proto-check: install
	$(BIN)/python tools/gen_protos.py --check

compose: install
	$(BIN)/kplane compose --write compose.yaml

# kplane:dev for `docker compose up`, from Debian's packages and PyPI only (tools/image.py); rebuilt
# only when its inputs change.
image: install
	$(BIN)/python tools/image.py

clean:
	rm -rf $(VENV) .kplane .bench *.egg-info build
