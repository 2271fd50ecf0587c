# Two entry points that work on a fresh machine with only Python 3.11+:
#   make demo   - create .venv, install dpkit, run the main job on the bundled UCI Adult data
#   make test   - create .venv with the test extras, run the whole test suite and build the docs (strict)
#   make docs   - build the documentation site into site/ (open site/index.html)
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip

.PHONY: demo test lint docs bench-noise bench-stats bench-svt bench-tables bench-hist bench-marginals clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e ".[tables]"
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e ".[test]"
	touch $@

# The main job: plan, release and ledger of examples/adult.toml. The demo uses a demo-only ledger
# (DEMO_LEDGER, deleted at the start, so the demo can be rerun) and says so; real releases use the per-user
# ledger (~/.local/share/dpkit/ledger.sqlite) or $DPKIT_LEDGER, which no option resets. The release replaces
# the previous demo's outputs (--replace); the second release shows the ledger refusing to overspend (exit 3).
DEMO_OUT    ?= out/adult
DEMO_LEDGER ?= out/demo-ledger.sqlite
DEMO_SYNTH_OUT    ?= out/adult_synthetic
DEMO_SYNTH_LEDGER ?= out/demo-synthetic-ledger.sqlite
DEMO_MODEL_OUT    ?= out/adult_model
DEMO_MODEL_LEDGER ?= out/demo-model-ledger.sqlite
DEMO_DEID_OUT     ?= out/adult_deid
demo: $(VENV)/.installed
	$(PY) -m dpkit plan examples/adult.toml
	@echo
	@echo "demo only: a fresh ledger at $(DEMO_LEDGER) (deleted now, so the demo can be rerun); real releases use"
	@echo "your per-user ledger ~/.local/share/dpkit/ledger.sqlite or \$$DPKIT_LEDGER, which no option resets."
	rm -f $(DEMO_LEDGER) $(DEMO_LEDGER)-journal $(DEMO_LEDGER)-wal $(DEMO_LEDGER)-shm
	$(PY) -m dpkit release examples/adult.toml --out $(DEMO_OUT) --ledger $(DEMO_LEDGER) --replace --yes
	@echo
	@$(PY) -m dpkit release examples/adult.toml --out $(DEMO_OUT) --ledger $(DEMO_LEDGER) --replace --yes; \
	  code=$$?; test $$code -eq 3 && echo "(a second release was refused with exit code 3, as it should be: the budget is spent)" \
	  || { echo "the second release should have been refused with exit code 3, got $$code"; exit 1; }
	@echo
	$(PY) -m dpkit ledger show --ledger $(DEMO_LEDGER)
	@echo
	@echo "marginals and a synthetic table (examples/adult_synthetic.toml): an (epsilon, delta) budget, so a demo ledger of its own"
	rm -f $(DEMO_SYNTH_LEDGER) $(DEMO_SYNTH_LEDGER)-journal $(DEMO_SYNTH_LEDGER)-wal $(DEMO_SYNTH_LEDGER)-shm
	$(PY) -m dpkit release examples/adult_synthetic.toml --out $(DEMO_SYNTH_OUT) --ledger $(DEMO_SYNTH_LEDGER) --replace --yes
	@echo
	@echo "a private income model (examples/adult_model.toml): logistic regression, with a DP held-out accuracy"
	rm -f $(DEMO_MODEL_LEDGER) $(DEMO_MODEL_LEDGER)-journal $(DEMO_MODEL_LEDGER)-wal $(DEMO_MODEL_LEDGER)-shm
	$(PY) -m dpkit release examples/adult_model.toml --out $(DEMO_MODEL_OUT) --ledger $(DEMO_MODEL_LEDGER) --replace --yes
	@echo
	@echo "why DP: the de-identification report of the bundled Adult (dpkit deid: counts only, spends nothing)"
	$(PY) -m dpkit deid adult --quasi-identifiers age,sex,race,native_country,education --sensitive income --k 5 --out $(DEMO_DEID_OUT) --replace --seed 1
	@echo
	@echo "outputs in $(DEMO_OUT)/: report.html (open it in a browser), results.csv/.json/.parquet, receipts.json;"
	@echo "in $(DEMO_SYNTH_OUT)/: the same, and the synthetic table adult_synthetic.csv;"
	@echo "in $(DEMO_MODEL_OUT)/: the model's coefficients and its DP held-out accuracy (report.html)."
	@echo "in $(DEMO_DEID_OUT)/: the de-identification report deid_report.html (uniqueness, k-anonymity, linkage; why DP)."
	@echo "Demo ledger: $(DEMO_LEDGER). Spec: examples/adult.toml (docs/cli.md). Library example: $(PY) examples/quickstart.py"

test: $(VENV)/.installed-test
	$(PY) -m ruff check src tests bench examples docs/_ext
	$(PY) -m mypy   # src/dpkit, configured in pyproject.toml [tool.mypy]
	$(PY) -m pytest -n 2 -q
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site   # not --quiet: it hides the warnings --strict counts
	$(PY) docs/_ext/check_api.py site

# The documentation site (mkdocs.yml): guides, the API reference from the docstrings, the benchmarks.
# Open site/index.html in a browser. `make test` builds it with --strict: a broken link or reference fails.
$(VENV)/.installed-docs: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e ".[docs]"
	touch $@

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site
	@echo "documentation: open site/index.html"

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

# Start-up (issue #12): CPU time of `import dpkit`, loading the bundled Adult data and `dpkit plan`, in fresh
# processes side by side with `import numpy` (medians; about a minute). Results: docs/benchmarks.md, "Start-up".
bench-startup: $(VENV)/.installed
	$(PY) bench/startup_bench.py --repeats 9

# Sparse vector and top-c selection (issue #4): dpkit only, reads ../shared/data/itemsets.
bench-svt: $(VENV)/.installed
	$(PY) bench/svt/topc.py

# Histograms (issue #6): the DPBench protocol on ../shared/data/dpbench, with OpenDP's b-ary tree side by side.
# About an hour on 2 shared cores; raw rows in bench/histograms/data/ (git-ignored), results in
# bench/histograms/results/, figures in docs/img/histograms/. `--quick` is a smoke test (about 15 s).
BENCH_HIST_VENV ?= .bench-hist-venv
$(BENCH_HIST_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(BENCH_HIST_VENV)
	$(BENCH_HIST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_HIST_VENV)/bin/python -m pip install --quiet -e . opendp matplotlib
	touch $@

bench-hist: $(BENCH_HIST_VENV)/.installed
	$(BENCH_HIST_VENV)/bin/python bench/histograms/dpbench.py --fresh
	$(BENCH_HIST_VENV)/bin/python bench/histograms/dpbench.py --part slow --slow-epsilons 0.01

# Tables (issue #5): dpkit.tables on DuckDB and Spark local vs the DuckDB floor, OpenDP Polars, PipelineDP and
# Tumult (which pins pyspark 3.5 / pandas 1.5 / numpy 1: its own venv). Generates ~1.3 GB of Parquet under
# bench/tables/data/ (git-ignored) and takes hours on 2 cores; results in bench/tables/results/.
BENCH_TABLES_VENV ?= .bench-tables-venv
BENCH_TUMULT_VENV ?= .bench-tumult-venv
BT = $(BENCH_TABLES_VENV)/bin/python
$(BENCH_TABLES_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(BENCH_TABLES_VENV)
	$(BT) -m pip install --quiet --upgrade pip
	$(BT) -m pip install --quiet -e ".[tables]" "ibis-framework[duckdb,pyspark]>=10" "pyspark>=3.5,<4.1" \
	    "sqlglot<30" "opendp[polars]" pipeline-dp narwhals psutil pyarrow
	touch $@
$(BENCH_TUMULT_VENV)/.installed:
	$(PYTHON) -m venv $(BENCH_TUMULT_VENV)
	$(BENCH_TUMULT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_TUMULT_VENV)/bin/python -m pip install --quiet tmlt-analytics psutil
	touch $@

bench-tables: $(BENCH_TABLES_VENV)/.installed $(BENCH_TUMULT_VENV)/.installed
	$(BT) bench/tables/gen_data.py --rows 1_000_000 --rows 10_000_000 --rows 100_000_000
	$(BT) bench/tables/run.py --rows 10_000_000 --rows 100_000_000 \
	    --systems plain_duckdb,floor_duckdb,dpkit_duckdb,opendp_polars
	$(BT) bench/tables/run.py --rows 10_000_000 --systems pipelinedp_local --timeout 600
	$(BT) bench/tables/run.py --rows 1_000_000 --rows 10_000_000 --systems dpkit_spark,tumult_spark \
	    --timeout 1800 --python tumult_spark=$(BENCH_TUMULT_VENV)/bin/python
	$(BT) bench/tables/narwhals_check.py --rows 10_000_000

# Marginals and synthetic data (issue #13): private-pgm's AIM and MST (PyPI mbi 1.1.0, which needs JAX) in their own
# environment, with dpkit installed there editable; every release in a fresh process, measured with dpkit's metric
# functions. Rows in bench/marginals/results/runs.jsonl (resumable), figures docs/img/marginals_<dataset>.png.
# The full grid (5 runs, AIM on Adult at every epsilon) takes many hours on 2 cores; see docs/benchmarks.md.
BENCH_MBI_VENV ?= .bench-mbi-venv
MARGINALS_RUNS ?= 5
$(BENCH_MBI_VENV)/.installed: pyproject.toml bench/marginals/requirements-mbi.txt bench/marginals/requirements-snsynth.txt
	$(PYTHON) -m venv $(BENCH_MBI_VENV)
	$(BENCH_MBI_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_MBI_VENV)/bin/python -m pip install --quiet -r bench/marginals/requirements-mbi.txt -e .
	$(BENCH_MBI_VENV)/bin/python -m pip install --quiet --no-deps -r bench/marginals/requirements-snsynth.txt
	touch $@

bench-marginals: $(BENCH_MBI_VENV)/.installed
	$(BENCH_MBI_VENV)/bin/python bench/marginals/run.py --runs $(MARGINALS_RUNS) --timeout 7200
	$(BENCH_MBI_VENV)/bin/python bench/marginals/run.py --report --plot

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(BENCH_STATS_VENV) site .pytest_cache .ruff_cache .hypothesis build dist src/*.egg-info
