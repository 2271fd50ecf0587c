# Two entry points that work on a fresh machine with only Python 3.11+:
#   make demo   - create .venv, install dpkit, run the main job on the bundled UCI Adult data
#   make test   - create .venv with the test extras, run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip

.PHONY: demo test lint bench-noise bench-stats bench-svt clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e ".[tables]"
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e ".[test]"
	touch $@

# The main job: plan, release and ledger of examples/adult.toml. The demo starts from a fresh output folder
# (and so a fresh ledger); the second release shows the ledger refusing to overspend (exit code 3).
DEMO_OUT ?= out/adult
demo: $(VENV)/.installed
	$(PY) -m dpkit plan examples/adult.toml
	@echo
	rm -rf $(DEMO_OUT)
	$(PY) -m dpkit release examples/adult.toml --out $(DEMO_OUT) --yes
	@echo
	@$(PY) -m dpkit release examples/adult.toml --out $(DEMO_OUT) --yes; \
	  test $$? -eq 3 && echo "(a second release was refused with exit code 3, as it should be: the budget is spent)"
	@echo
	$(PY) -m dpkit ledger show --ledger $(DEMO_OUT)/ledger.sqlite
	@echo
	@echo "outputs in $(DEMO_OUT)/: report.html (open it in a browser), results.csv/.json/.parquet, receipts.json,"
	@echo "ledger.sqlite. Spec: examples/adult.toml (docs/cli.md). Library example: $(PY) examples/quickstart.py"

test: $(VENV)/.installed-test
	$(PY) -m ruff check src tests bench examples
	$(PY) -m pytest -n 2 -q

lint: $(VENV)/.installed-test
	$(PY) -m ruff check src tests bench examples

# Benchmarks run in a separate environment with the peer libraries (never dpkit dependencies).
BENCH_VENV ?= .bench-venv
$(BENCH_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . opendp
	touch $@

bench-noise: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python bench/noise_bench.py --repeats 5

# Statistics benchmarks (issue #3): diffprivlib needs scikit-learn < 1.8, so it gets its own environment.
BENCH_STATS_VENV ?= .bench-stats-venv
$(BENCH_STATS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(BENCH_STATS_VENV)
	$(BENCH_STATS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_STATS_VENV)/bin/python -m pip install --quiet -e . opendp diffprivlib "scikit-learn<1.8" pandas
	touch $@

bench-stats: $(BENCH_STATS_VENV)/.installed
	$(BENCH_STATS_VENV)/bin/python bench/stats/peers.py
	$(BENCH_STATS_VENV)/bin/python bench/stats/li_mean_ranking.py
	$(BENCH_STATS_VENV)/bin/python bench/stats/near_ptr.py

# Sparse vector and top-c selection (issue #4): dpkit only, reads ../shared/data/itemsets.
bench-svt: $(VENV)/.installed
	$(PY) bench/svt/topc.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(BENCH_STATS_VENV) .pytest_cache .ruff_cache .hypothesis build dist src/*.egg-info
