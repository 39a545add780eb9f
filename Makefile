PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench serve-demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

# The main job: the standalone comparison on Adult (experiments/demo.toml, about two minutes on
# two cores), its summary table, and its plots in demo-output/.
demo: $(STAMP)
	$(BIN)/longldp run experiments/demo.toml --out demo-output
	$(BIN)/longldp plot demo-output/results.parquet --out demo-output

test: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard benchmarks scripts experiments)
	$(BIN)/python scripts/api_reference.py --out docs/api.md
	node --test clients/js/test/
	$(BIN)/pytest -n 2 -q

# The API reference from the docstrings (fails on a missing docstring or a broken reference).
docs: $(STAMP)
	$(BIN)/python scripts/api_reference.py --out docs/api.md

lint: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard benchmarks scripts experiments)

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[all,dev,bench]'
	$(BIN)/python benchmarks/bench_oracles.py
	$(BIN)/python benchmarks/bench_service.py

# Collecting for real on loopback: a server, a collection, 10,000 devices with the real client
# over 10 epochs; prints the dashboard URL and keeps serving until Ctrl-C (docs/server.md).
serve-demo: $(STAMP)
	$(BIN)/python scripts/serve_demo.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .ruff_cache
