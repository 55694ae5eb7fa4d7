# One command per stage of the pipeline: export -> serve -> loadtest -> report.
# Every target depends on `setup`, so a fresh clone needs no manual step.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MODELS ?= models
BATCHING ?= off
PLAN ?= loadtest/plans/quick.toml
EXPORT_ARGS ?=

.PHONY: setup export test bench-server bench-loadgen serve serve-cpu serve-gpu stop loadtest locust-ui report size demo clean-venv

setup: $(STAMP)

# Reinstalls only when the dependency pins change.
$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e '.[test]'
	touch $(STAMP)

export: setup
	$(PY) -m model_export --output_dir $(MODELS) $(EXPORT_ARGS)

test: setup
	$(PY) -m pytest -q

# Benchmarks print ratios measured within one run, server and client pinned to different cores.
bench-server: setup
	$(PY) -m loadtest.benchmarks.server --model_base_path $(MODELS)/mnist --samples $(MODELS)/mnist-samples.npz

bench-loadgen: setup
	$(PY) -m loadtest.benchmarks.loadgen --model_base_path $(MODELS)/mnist --samples $(MODELS)/mnist-samples.npz

clean-venv:
	rm -rf $(VENV)

# --- serving: serve, serve-cpu, serve-gpu, stop ---
# One serving config (serving/serving.toml) -> TF Serving's files in build/serving/<profile>/,
# read by the TF Serving containers (docker/compose.yaml) and the embedded server alike.
# BATCHING picks the profile (off, cpu, gpu); MODELS the directory `make export` wrote.
# serve: embedded server in the foreground (Ctrl-C stops it).
# serve-cpu / serve-gpu: TF Serving container when Docker can, else the embedded server, in the
# background; recorded in .state/servers.json for `make loadtest`. stop: stops them all.
SERVE_ARGS = --batching $(BATCHING) --models_dir $(MODELS)

serve: setup
	$(PY) -m serving.deploy.launcher run --device cpu $(SERVE_ARGS)

serve-cpu: setup
	$(PY) -m serving.deploy.launcher start --device cpu $(SERVE_ARGS)

serve-gpu: setup
	$(PY) -m serving.deploy.launcher start --device gpu $(SERVE_ARGS)

stop: setup
	$(PY) -m serving.deploy.launcher stop


# --- load tests: loadtest, locust-ui ---
# `make loadtest` sweeps every server in the state file (make serve-*), or TARGET=host:port
# (REST_URL=http://host:port for its metrics); LOADTEST_ARGS adds flags, e.g. --measure-s 3.
TARGET ?=
REST_URL ?=
LOADTEST_ARGS ?=
LOCUST_HOST ?=
LOCUST_WEB_PORT ?= 8089

loadtest: setup
	$(PY) -m loadtest --plan $(PLAN) $(if $(TARGET),--target $(TARGET)) $(if $(REST_URL),--rest-url $(REST_URL)) $(LOADTEST_ARGS)

# Locust's web UI (http://127.0.0.1:$(LOCUST_WEB_PORT)) on the same locustfile, against the running server.
locust-ui: setup
	$(PY) -m loadtest.load.ui --web-port $(LOCUST_WEB_PORT) $(if $(LOCUST_HOST),--host $(LOCUST_HOST))


# --- report, sizing and the demo ---
# RESULTS defaults to the newest results/<UTC time>/results.jsonl, looked up when the recipe runs
# (so `make loadtest report` sees the run just made). Several files: RESULTS="a.jsonl b.jsonl".
RESULTS ?= $(shell ls -1d results/*/results.jsonl 2>/dev/null | sort | tail -n 1)
COMPARE ?=
P99_MS ?= 50
TARGET_RPS ?= 1000
TARGET_IPS ?=
HEADROOM ?= 0.2
PRICES ?= loadtest/prices.example.toml

report: setup
	@test -n "$(RESULTS)" || { echo "make report: no results/*/results.jsonl yet: run make loadtest, or pass RESULTS=path/results.jsonl" >&2; exit 2; }
	$(PY) -m loadtest.analysis.report $(RESULTS) $(if $(COMPARE),--compare $(COMPARE))

size: setup
	@test -n "$(RESULTS)" || { echo "make size: no results/*/results.jsonl yet: run make loadtest, or pass RESULTS=path/results.jsonl" >&2; exit 2; }
	$(PY) -m loadtest.analysis.size --p99_ms $(P99_MS) $(if $(TARGET_IPS),--target_ips $(TARGET_IPS),--target_rps $(TARGET_RPS)) --headroom $(HEADROOM) --prices $(PRICES) $(RESULTS)

# The one-command demo: whatever can serve here (the embedded server on CPU when there is no
# Docker engine), the quick sweep, the report; the server is stopped however the sweep ends.
DEMO_BATCHING ?= cpu

demo: setup
	@if ! ls -d $(MODELS)/mnist/[0-9]* >/dev/null 2>&1; then $(MAKE) --no-print-directory export; fi
	@$(MAKE) --no-print-directory serve-cpu BATCHING=$(DEMO_BATCHING)
	@trap '$(MAKE) --no-print-directory stop' EXIT; $(MAKE) --no-print-directory loadtest
	@echo "demo: report at $$(ls -1t results/*/report*.html | head -n 1)"

