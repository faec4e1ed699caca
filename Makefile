# zoo: `make train` runs the main job (installing only what it runs), `make test` runs every
# package's tests (adding the test tools and the TPU compile environment).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TPU_VENV := .venv-tpu
PACKAGES := packages/zoo-attention kernels/flash-tpu kernels/chunked packages/zoo-layers models/zoo-models training/zoo-train
PYPROJECTS := $(addsuffix /pyproject.toml,$(PACKAGES))
RUNTIME_STAMP := $(VENV)/.runtime
STAMP := $(VENV)/.installed
TPU_STAMP := $(TPU_VENV)/.installed
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
TPU_PIP := $(TPU_VENV)/bin/python -m pip --disable-pip-version-check -q
# Every zoo package of the environment is this tree's, editable: a wheel installed over one (a
# pin installed into .venv by hand) is replaced again, named.
EDITABLE := scripts/editable.py $(PACKAGES)
PINNED := .venv-pinned
PIN ?= zoo-flash-tpu==0.1.1

.PHONY: install runtime test lint format train bench bench-quick wheels wheelhouse pinned clean \
	test-attention test-flash-tpu test-chunked test-layers test-models test-train test-integration test-multidevice test-bench

# Everything `make test` needs: .venv with the test tools, and .venv-tpu.
install: $(STAMP) $(TPU_STAMP)
	@$(BIN)/python $(EDITABLE)
	@$(TPU_VENV)/bin/python $(EDITABLE)

# What `zoo` needs to run, and nothing more: CPU jax and every zoo package, editable. Re-runs when
# a pin or a package definition changes.
runtime: $(RUNTIME_STAMP)
	@$(BIN)/python $(EDITABLE)

$(RUNTIME_STAMP): constraints.txt $(PYPROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt pip hatchling editables
	$(PIP) install -c constraints.txt --no-build-isolation $(addprefix -e ,$(PACKAGES))
	@touch $@

# The test tools and the reference implementations the tests compare with (torch,
# transformers, peft), added to the same environment.
# zoo-train's `wandb` extra too, so the tracker's tests run.
$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	$(PIP) install -c constraints.txt --no-build-isolation -e "training/zoo-train[wandb]" \
		-r requirements-dev.txt
	@touch $@

# A separate environment with libtpu, used only to compile for real TPU generations
# (compile-only topologies): the kernel's compile tests and `.venv-tpu/bin/zoo compile`. Every zoo
# package is installed (zoo-train with its `tpu` extra); the main .venv stays CPU-only.
$(TPU_STAMP): constraints.txt $(PYPROJECTS)
	@test -x $(TPU_VENV)/bin/python || $(PYTHON) -m venv $(TPU_VENV)
	$(TPU_PIP) install -c constraints.txt pip hatchling editables
	$(TPU_PIP) install -c constraints.txt --no-build-isolation \
		$(addprefix -e ,$(filter-out training/zoo-train,$(PACKAGES))) -e "training/zoo-train[tpu]"
	@touch $@

# The main job: a small Llama-style byte-level model on the Python standard library's sources
# (found at run time), with progress bar, checkpoints, loss curve and a sample at the end.
# Running it again resumes in runs/default (or says the run is complete).
train: runtime
	$(BIN)/zoo train

test: install
	$(BIN)/python scripts/run_tests.py

test-attention: install ; $(BIN)/python scripts/run_tests.py zoo-attention
test-flash-tpu: install ; $(BIN)/python scripts/run_tests.py zoo-flash-tpu
test-chunked: install ; $(BIN)/python scripts/run_tests.py zoo-chunked
test-layers: install ; $(BIN)/python scripts/run_tests.py zoo-layers
test-models: install ; $(BIN)/python scripts/run_tests.py zoo-models
test-train: install ; $(BIN)/python scripts/run_tests.py zoo-train
test-integration: install ; $(BIN)/python scripts/run_tests.py integration
test-multidevice: install ; $(BIN)/python scripts/run_tests.py multidevice
test-bench: install ; $(BIN)/python scripts/run_tests.py bench

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# One wheel per package, each with its own version, into dist/.
wheels: install
	rm -rf dist && mkdir -p dist
	$(BIN)/python -m pip --disable-pip-version-check -q wheel --no-deps --no-build-isolation -w dist $(PACKAGES)
	@ls -1 dist

# Every release in releases.toml, built from its recorded tree in this repository's history, one
# wheel per package version, into wheelhouse/: `pip install --find-links wheelhouse
# zoo-flash-tpu==0.1.1` then works offline. Wheels already built from the same tree are kept.
wheelhouse: runtime
	$(BIN)/python scripts/wheelhouse.py --out wheelhouse

# An environment of its own for pinned releases, the rest of zoo from this tree: .venv-pinned
# (make pinned PIN='zoo-flash-tpu==0.1.1'; again with another PIN to upgrade or roll back).
pinned: runtime
	$(BIN)/python scripts/pinned_env.py $(PINNED) $(PIN)

clean:
	rm -rf $(VENV) $(TPU_VENV) $(PINNED) dist wheelhouse .test-reports

# Benchmarks: tables printed last, JSON under bench/results/, plots, docs/benchmarks.md regenerated.
bench: install
	$(BIN)/python -m bench.run

bench-quick: install
	$(BIN)/python -m bench.run --quick
