# zoo: `make train` runs the main job (installing only what it runs), `make test` runs every
# package's tests (adding the test tools and the TPU compile environments) on the default JAX,
# and the contract, kernels, layers and a training smoke on the newest JAX; `make test-newest`
# runs every suite on the newest JAX.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TPU_VENV := .venv-tpu
PACKAGES := packages/zoo-attention kernels/flash-tpu kernels/chunked kernels/splash kernels/megablox kernels/deltanet-tpu packages/zoo-layers data/zoo-data models/zoo-models training/zoo-train
PYPROJECTS := $(addsuffix /pyproject.toml,$(PACKAGES))
# Packages of the newest-JAX environments alone: zoo-tokamax (tokamax needs jax >= 0.11.1, so
# Python >= 3.12).
NEWEST_PACKAGES := $(PACKAGES) kernels/tokamax
NEWEST_PYPROJECTS := $(addsuffix /pyproject.toml,$(NEWEST_PACKAGES))
NEWEST_EDITABLE := scripts/editable.py $(NEWEST_PACKAGES)
RUNTIME_STAMP := $(VENV)/.runtime
STAMP := $(VENV)/.installed
TPU_STAMP := $(TPU_VENV)/.installed
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
TPU_PIP := $(TPU_VENV)/bin/python -m pip --disable-pip-version-check -q
# Every zoo package of the environment is this tree's, editable: a wheel installed over one (a
# pin installed into .venv by hand) is replaced again, named.
EDITABLE := scripts/editable.py $(PACKAGES)
PINNED := .venv-pinned
# The newest-JAX leg: jax 0.12 on a Python >= 3.12 that scripts/newest_python.py finds (PATH,
# pyenv, or $$ZOO_NEWEST_PYTHON). Its own environment and libtpu compile environment.
NEWEST_VENV := .venv-newest
NEWEST_TPU_VENV := .venv-newest-tpu
NEWEST_STAMP := $(NEWEST_VENV)/.installed
NEWEST_FULL_STAMP := $(NEWEST_VENV)/.full
NEWEST_TPU_STAMP := $(NEWEST_TPU_VENV)/.installed
NEWEST_PIP := $(NEWEST_VENV)/bin/python -m pip --disable-pip-version-check -q
NEWEST_TPU_PIP := $(NEWEST_TPU_VENV)/bin/python -m pip --disable-pip-version-check -q
PIN ?=
# What every environment installs first, before any package: pip itself, the build backends of the
# zoo packages (hatchling, editables; installs run without build isolation so these pins build
# them) and setuptools, which builds the dependencies that ship only a source distribution
# (rouge-score, for the eval extra). A new venv has an old setuptools (3.11) or none (3.12 on).
BUILD_TOOLS := pip hatchling editables setuptools
# The pip verb of the package installs. `make install-check` runs the same recipes in new
# environments with an empty pip cache as a dry run (`install --dry-run --report ...`).
PIP_INSTALL ?= install
# zoo-train's extras in .venv (and the newest leg's full environment): the tracker's and the
# lm-eval backend's tests run there.
DEV_EXTRAS := [wandb,eval]
# Every zoo package of an environment ($(2), default $(PACKAGES)), editable, with zoo-train's
# extras $(1): each install step names all of them, so one resolution sees the whole environment.
zoo_packages = $(addprefix -e ,$(filter-out training/zoo-train,$(or $(2),$(PACKAGES)))) \
	-e $(if $(1),"training/zoo-train$(1)",training/zoo-train)

.PHONY: install install-check newest newest-full test-full test-newest compat runtime eval-deps test lint format train bench bench-quick wheels wheelhouse pinned clean \
	test-attention test-flash-tpu test-chunked test-splash test-megablox test-deltanet-tpu test-tokamax test-layers test-data test-models test-train test-integration test-multidevice test-bench

# Everything `make test` needs: .venv with the test tools, .venv-tpu, and the newest-JAX leg's
# two environments where a Python >= 3.12 exists (the test summary says so where none does).
install: $(STAMP) $(TPU_STAMP) newest
	@$(BIN)/python $(EDITABLE)
	@$(TPU_VENV)/bin/python $(EDITABLE)

# The install steps of every environment as a new machine runs them, on each supported Python
# found (3.11, 3.12, 3.13): new venvs under build/install-check/, an empty pip cache, package
# installs as dry runs, and every source distribution built into a wheel. `.ci/run` runs it first.
install-check:
	$(PYTHON) scripts/install_check.py

newest:
	@py=$$($(PYTHON) scripts/newest_python.py 2>&1) || { echo "zoo: the newest-JAX leg will not run: $$py"; exit 0; }; \
	$(MAKE) --no-print-directory $(NEWEST_STAMP) $(NEWEST_TPU_STAMP) NEWEST_PYTHON=$$py && \
	$(NEWEST_VENV)/bin/python $(NEWEST_EDITABLE) && $(NEWEST_TPU_VENV)/bin/python $(NEWEST_EDITABLE)

# As a user with a current JAX: jax first, then zoo with the constraints, which keep it (the
# pins for Python >= 3.12 are jax 0.12's). The test tools the newest leg of `make test` needs.
$(NEWEST_STAMP): Makefile constraints.txt $(NEWEST_PYPROJECTS)
	@test -x $(NEWEST_VENV)/bin/python || $(NEWEST_PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_PIP) install -c constraints.txt $(BUILD_TOOLS)
	$(NEWEST_PIP) $(PIP_INSTALL) -c constraints.txt jax
	$(NEWEST_PIP) $(PIP_INSTALL) -c constraints.txt --no-build-isolation \
		$(call zoo_packages,,$(NEWEST_PACKAGES)) pytest pytest-xdist psutil
	@touch $@

# jax[tpu] at the newest leg's version, with its libtpu, for the TPU compile tests.
$(NEWEST_TPU_STAMP): Makefile constraints.txt $(NEWEST_PYPROJECTS)
	@test -x $(NEWEST_TPU_VENV)/bin/python || $(NEWEST_PYTHON) -m venv $(NEWEST_TPU_VENV)
	$(NEWEST_TPU_PIP) install -c constraints.txt $(BUILD_TOOLS)
	$(NEWEST_TPU_PIP) $(PIP_INSTALL) -c constraints.txt --no-build-isolation \
		$(call zoo_packages,[tpu],$(NEWEST_PACKAGES))
	@touch $@

# Everything the whole suite needs on the newest leg: the references (torch, transformers,
# peft, TRL) and zoo-train's wandb and eval extras, as in .venv.
newest-full: newest
	@test -x $(NEWEST_VENV)/bin/python || { echo "zoo: no Python >= 3.12 for the newest-JAX leg"; exit 1; }
	@$(MAKE) --no-print-directory $(NEWEST_FULL_STAMP)

$(NEWEST_FULL_STAMP): $(NEWEST_STAMP) requirements-dev.txt
	$(NEWEST_PIP) $(PIP_INSTALL) -c constraints.txt --no-build-isolation \
		$(call zoo_packages,$(DEV_EXTRAS),$(NEWEST_PACKAGES)) pytest pytest-xdist psutil \
		-r requirements-dev.txt
	@touch $@

# What `zoo` needs to run, and nothing more: CPU jax and every zoo package, editable. Re-runs when
# a pin or a package definition changes.
runtime: $(RUNTIME_STAMP)
	@$(BIN)/python $(EDITABLE)

$(RUNTIME_STAMP): Makefile constraints.txt $(PYPROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt $(BUILD_TOOLS)
	$(PIP) $(PIP_INSTALL) -c constraints.txt --no-build-isolation $(call zoo_packages,)
	@touch $@

# `zoo eval --tasks` and `--eval-harness` on top of `make train`'s environment: zoo-train's `eval`
# extra (lm-eval; no torch) into .venv, with the same constraints: 0.3 GB more. Not part of
# `make train`, which does not use it. `make install` includes it.
EVAL_STAMP := $(VENV)/.eval
eval-deps: $(EVAL_STAMP)
	@$(BIN)/python $(EDITABLE)

$(EVAL_STAMP): $(RUNTIME_STAMP)
	$(PIP) $(PIP_INSTALL) -c constraints.txt --no-build-isolation $(call zoo_packages,[eval])
	@touch $@

# The test tools and the reference implementations the tests compare with (torch,
# transformers, peft), added to the same environment.
# zoo-train's `wandb` and `eval` extras too, so the tracker's and lm-eval backend's tests run.
$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	$(PIP) $(PIP_INSTALL) -c constraints.txt --no-build-isolation $(call zoo_packages,$(DEV_EXTRAS)) \
		-r requirements-dev.txt
	@touch $@

# A separate environment with libtpu, used only to compile for real TPU generations
# (compile-only topologies): the kernel's compile tests and `.venv-tpu/bin/zoo compile`. Every zoo
# package is installed (zoo-train with its `tpu` extra); the main .venv stays CPU-only.
$(TPU_STAMP): Makefile constraints.txt $(PYPROJECTS)
	@test -x $(TPU_VENV)/bin/python || $(PYTHON) -m venv $(TPU_VENV)
	$(TPU_PIP) install -c constraints.txt $(BUILD_TOOLS)
	$(TPU_PIP) $(PIP_INSTALL) -c constraints.txt --no-build-isolation $(call zoo_packages,[tpu])
	@touch $@

# The main job: a small Llama-style byte-level model on the Python standard library's sources
# (found at run time), with progress bar, checkpoints, loss curve and a sample at the end.
# Running it again resumes in runs/default (or says the run is complete).
train: runtime
	$(BIN)/zoo train

test: install
	$(BIN)/python scripts/run_tests.py --with-newest

# Every suite on the default JAX with the cases marked `full` (pytest.ini) that `make test`
# leaves out; `make test-newest` runs them on the newest JAX.
test-full: install
	$(BIN)/python scripts/run_tests.py --full

# Every suite on the newest JAX (jax 0.12, Python >= 3.12); .ci/run runs it after `make test`.
test-newest: install newest-full
	$(BIN)/python scripts/run_tests.py --newest

test-attention: install ; $(BIN)/python scripts/run_tests.py zoo-attention
test-flash-tpu: install ; $(BIN)/python scripts/run_tests.py zoo-flash-tpu
test-chunked: install ; $(BIN)/python scripts/run_tests.py zoo-chunked
test-splash: install ; $(BIN)/python scripts/run_tests.py zoo-splash
test-megablox: install ; $(BIN)/python scripts/run_tests.py zoo-megablox
test-deltanet-tpu: install ; $(BIN)/python scripts/run_tests.py zoo-deltanet-tpu
test-tokamax: install ; $(BIN)/python scripts/run_tests.py --newest zoo-tokamax
test-layers: install ; $(BIN)/python scripts/run_tests.py zoo-layers
test-data: install ; $(BIN)/python scripts/run_tests.py zoo-data
test-models: install ; $(BIN)/python scripts/run_tests.py zoo-models
test-train: install ; $(BIN)/python scripts/run_tests.py zoo-train
test-integration: install ; $(BIN)/python scripts/run_tests.py integration
test-multidevice: install ; $(BIN)/python scripts/run_tests.py multidevice
test-bench: install ; $(BIN)/python scripts/run_tests.py bench

# Ruff, then mypy's type check of what mypy.ini names (every package's src/, scripts/, the benchmarks).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

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
# (make pinned PIN='zoo-flash-tpu==0.1.1'; again with another PIN to upgrade or roll back; no
# PIN: the latest releases are listed).
pinned: runtime
	$(BIN)/python scripts/pinned_env.py $(PINNED) $(PIN)

clean:
	rm -rf $(VENV) $(TPU_VENV) $(NEWEST_VENV) $(NEWEST_TPU_VENV) $(PINNED) dist wheelhouse .test-reports

# The compatibility matrix: every kernel release against each JAX of scripts/compat_matrix.py,
# into docs/compatibility.md (environments kept under build/matrix/).
compat: install
	$(BIN)/python scripts/compat_matrix.py

# Benchmarks: tables printed last, JSON under bench/results/, plots, docs/benchmarks.md regenerated.
bench: install
	$(BIN)/python -m bench.run

bench-quick: install
	$(BIN)/python -m bench.run --quick
