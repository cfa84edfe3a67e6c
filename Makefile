# lafuse developer targets. `make run` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "installing Java 17 for the SystemDS conformance tests"; \
	  (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless) || \
	  echo "warning: no java; the SystemDS conformance tests will fail"; }
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/lafuse run examples/multiLogReg.dml --stats

test: install
	$(BIN)/python -m pytest tests

bench: install
	$(BIN)/python benchmarks/dense_ops.py
	$(BIN)/python benchmarks/systemds_algorithms.py
	$(BIN)/lafuse calibrate
	$(BIN)/python benchmarks/cost_accuracy.py
	$(BIN)/python benchmarks/fusion.py --quick

lint: install
	$(BIN)/ruff check lafuse tests
	$(BIN)/mypy lafuse

clean:
	rm -rf $(VENV) build *.egg-info
