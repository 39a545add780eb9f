PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench serve-demo soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

# The main job: the standalone comparison on Adult (experiments/demo.toml, about two minutes on
# two cores), its summary table, and its plots in demo-output/: PNG, and SVG beside it for a
# paper or a slide (tests/test_figures.py runs these plot lines).
demo: $(STAMP)
	$(BIN)/longldp run experiments/demo.toml --out demo-output
	$(BIN)/longldp plot demo-output/results.parquet --out demo-output
	$(BIN)/longldp plot demo-output/results.parquet --out demo-output --format svg

test: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard benchmarks scripts experiments)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	node --test clients/js/test/
	$(BIN)/pytest -n 2 -q

# The documentation site in site/ (mkdocs.yml): every page of docs/, the tutorials, and the API
# reference rendered from the docstrings; --strict fails on a broken link, anchor or reference.
# `$(BIN)/mkdocs serve` serves it while you edit.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard benchmarks scripts experiments)

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[all,dev,bench]'
	$(BIN)/python benchmarks/bench_oracles.py
	$(BIN)/python benchmarks/bench_service.py

# Collecting for real on loopback: a server, a collection, 10,000 devices with the real client
# over 10 epochs; prints the dashboard URL and keeps serving until Ctrl-C (docs/server.md).
# DEMO_ARGS passes options to the script (e.g. DEMO_ARGS="--devices 500 --exit").
serve-demo: $(STAMP)
	$(BIN)/python scripts/serve_demo.py $(DEMO_ARGS)

# The collection server's randomized fault-injection simulation, 10,000 seeded sequences on
# SQLite and PostgreSQL (`make test` runs a few hundred; docs/server.md, "How it is tested").
soak: $(STAMP)
	LONGLDP_SIM_SEQUENCES=10000 $(BIN)/pytest -q -p no:cacheprovider tests/test_server_sim.py

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info .pytest_cache .ruff_cache
