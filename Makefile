# tuner — the two commands a new user runs: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-all lint gpu gpu-wheels clean

install: $(STAMP)

# torch/torchvision pinned to the versions this machine's pip takes from disk; any torch
# 2.4-2.14 satisfies the package itself (pyproject.toml).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(BIN)/python -m pip install -q -e '.[test,postgres]'
	touch $(STAMP)

# A real search on this machine: resnet18 at 64 px, eager vs inductor, two batch sizes.
demo: install
	rm -rf studies/demo
	$(BIN)/tuner search --model resnet18 --image-size 64 --batch-sizes 1,16 \
	    --backend eager,inductor --mode default --device cpu --name demo \
	    --min-seconds 1 --timeout 10m --confirm 2
	@echo
	@echo "files: studies/demo/trials.parquet studies/demo/pareto.parquet"

# tests/unit/<package> mirrors tuner/, tests/integration runs real processes (a few real CPU
# compiles of tiny models), tests/benchmarks tests the benchmark scripts; the gpu-marked tests
# (tests/gpu) are left out here: `make gpu` runs them. Time on the 2-core machine, idle:
# 10 min 24 s for 1,284 passed and 8 skipped (2026-12-07 23:46 UTC, `time make test`; a
# pure-Python loop of 20M additions took 1.5 s on it; 6 min 50 s for 1,242 tests at aa4bfce's
# time on a faster one).
# Tests' temporary folders on tmpfs where there is one: a study's SQLite commits are fsynced,
# which on a disk cost several ms each (about 10 % of a study test).
TEST_TMP ?= $(shell test -w /dev/shm && echo /dev/shm/tuner-tests-$$(id -u))

# A module's tests stay together (--dist loadfile: module fixtures are made once), the modules
# handed out in the order collected (--no-loadscope-reorder), integration first: xdist's
# default hands out the modules with the most tests first, so the few-test modules of real
# compiles and processes (test_warm_start: 4 tests, over a minute) came last, with little left
# for the other worker to run beside them.
test: install
	$(BIN)/python -m pytest -q -m "not gpu" -n 2 --dist loadfile --no-loadscope-reorder \
	    $(if $(TEST_TMP),--basetemp=$(TEST_TMP))

lint: install
	$(BIN)/ruff check tuner tests benchmarks
	$(BIN)/mypy tuner

# A GPU machine without internet access: download optuna and its dependencies as wheels here,
# copy the repository with .whl/ to the GPU machine and run scripts/gpu_check.sh there
# (docs/offline-gpu.md).
gpu-wheels:
	mkdir -p .whl
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
	    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
	    --platform manylinux2014_x86_64 -d .whl optuna==5.0.0 alembic==1.20.1 \
	    sqlalchemy==2.1.9 colorlog==6.12.0 mako

gpu:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) studies/demo .pytest_cache
