# lafuse developer targets. `make run` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: install run test lint bench bench-full clean

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "installing Java 17 for the SystemDS conformance tests"; \
	  (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless) || \
	  echo "warning: no java; the SystemDS conformance tests will fail"; }
	@command -v dot >/dev/null 2>&1 || { echo "installing Graphviz for plan pictures (explain --format svg, visualize)"; \
	  (apt-get update -qq && apt-get install -y -qq graphviz) || \
	  echo "warning: no graphviz; plan pictures other than --format dot will fail"; }
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	# the primitives generated kernels share, compiled once as pip compiles bytecode (lafuse/warm.py)
	$(BIN)/python -m lafuse cache warm
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/lafuse run examples/multiLogReg.dml --stats

test: install
	$(BIN)/python -m pytest tests

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $(BENCH_STAMP)

# the suite of benchmarks/suite.py: results/bench-<timestamp>.json and docs/benchmarks.md (quick: ~10 min, 9m46s last)
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/suite.py --quick

bench-full: $(BENCH_STAMP)
	$(BIN)/python benchmarks/suite.py

lint: install
	$(BIN)/ruff check lafuse tests benchmarks
	$(BIN)/mypy lafuse

clean:
	rm -rf $(VENV) build *.egg-info
