# Two commands do all the set-up:  `make demo`  and  `make test`.
# Both create (or reuse) the virtual environment in $(VENV).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0: a CPU build lies on the development machines; elsewhere pick the
# build for your hardware, e.g. make TORCH_SPEC='torch==2.13.0' PIP_EXTRA='--index-url ...'
TORCH_SPEC ?= torch==2.13.0
FAIRSEQ_SPEC ?= ve-fairseq==0.12.3
STAMP := $(VENV)/.installed
# test processes (pytest-xdist -n): auto = one per CPU core
TEST_WORKERS ?= auto

.PHONY: install demo test lint format bench bench-speed bench-quality bench-converged clean

install: $(STAMP)

# Bytecode: pip compiles every file of every package on one core (about half of the
# install's time here), but the tools import about a quarter of them: --no-compile, then
# scripts/compile_bytecode.py imports the entry points with bytecode writing on, in two
# processes (19 s of CPU here, against 41 s for compileall of the whole of site-packages).
$(STAMP): setup.py requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile $(PIP_EXTRA) "$(TORCH_SPEC)"
	# fairseq without its torchaudio dependency (which would pull a second torch)
	$(BIN)/python -m pip install -q --no-compile --no-deps "$(FAIRSEQ_SPEC)"
	$(BIN)/python -m pip install -q --no-compile -r requirements.txt "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q --no-deps -e .
	$(BIN)/python scripts/compile_bytecode.py > /dev/null
	touch $@

demo: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash scripts/demo_multi30k.sh

# One pytest-xdist worker per core, a whole module per worker at a time (its fixtures are
# built once), in the order of tests/conftest.py (longest modules first; without
# --no-loadscope-reorder xdist would sort the modules by their number of tests and start
# the long ones with few tests last); one thread each: the tests' tiny models gain nothing
# from a second thread.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	OMP_NUM_THREADS=1 PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash bench/run_core_bench.sh

# needs `make demo` first; about 11 min here (bench/RESULTS.md)
bench-speed: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python bench/speed_bench.py --data work/multi30k/bin \
		--checkpoint work/demo/checkpoints/checkpoint_last.pt --out bench/speed --sentences 48 --reps 3

# resumable; about 77 min here from nothing (bench/RESULTS.md)
bench-quality: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash bench/run_quality_bench.sh

# resumable; hours here (bench/RESULTS.md, "Converged 72-head model")
bench-converged: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash bench/run_converged_bench.sh

# CTranslate2 deployment benchmark on the converged model (bench/run_ct2_bench.sh: DSP at a
# uniform layout, 3 seeds, every model with the default recovery, then bench/ct2_bench.py);
# the shared ../shared/data/multi30k-base72 baseline, else `make bench-converged`'s
CT2_LAYOUT ?= 4,4
bench-ct2: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash bench/run_ct2_bench.sh --layout $(CT2_LAYOUT) $(CT2_ARGS)

clean:
	rm -rf $(VENV) work
