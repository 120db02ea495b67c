# The single entry point: set-up, local cluster, deploy, test, bench.
#   make up     - install everything needed, start the local cluster, `pulumi up` the dev stack
#   make test   - the whole test suite (unit with mocks, real TensorFlow, real pulumi up on kwok)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
PYTEST_ARGS ?=

.PHONY: help venv tools cluster cluster-stop cluster-status up preview down outputs test test-unit test-training test-e2e bench lint clean

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[training,dev]'
	touch $@

venv: $(VENV)/.installed ## Python virtualenv with every dependency

tools: ## Build or find the pinned Pulumi CLI, Kubernetes provider, kube binaries, etcd, kwok
	hack/tools.sh all

cluster: tools ## Start the local kwok cluster (idempotent)
	hack/cluster.sh start

cluster-stop: ## Stop the local cluster
	hack/cluster.sh stop

cluster-status: ## Show the local cluster's nodes
	hack/cluster.sh status

up: venv cluster ## Deploy the $(STACK) stack to the local cluster (refreshing state first: the cluster may be new) and print its readiness
	cd infra && ../$(PY) -m tfk8s.automation up $(STACK) --refresh

preview: venv cluster ## Preview the $(STACK) stack
	cd infra && ../$(PY) -m tfk8s.automation preview $(STACK)

outputs: venv ## Print the readiness of the $(STACK) stack
	cd infra && ../$(PY) -m tfk8s.automation outputs $(STACK)

down: venv ## Destroy the $(STACK) stack and stop the local cluster
	if hack/cluster.sh status >/dev/null 2>&1; then cd infra && ../$(PY) -m tfk8s.automation destroy $(STACK); fi
	hack/cluster.sh stop

test: venv tools ## Every test: mocks, real TensorFlow processes, real pulumi up against kwok
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv ## Mock-based unit tests only (seconds)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-training: venv ## Real TensorFlow processes on loopback
	$(PY) -m pytest tests/training $(PYTEST_ARGS)

test-e2e: venv tools ## Real pulumi up/destroy against a throwaway kwok cluster
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

bench: venv ## Benchmarks (see README "Benchmarks")
	$(PY) bench/program_eval.py
	$(PY) bench/input_pipeline.py
	$(PY) bench/training_throughput.py

lint: venv ## ruff and mypy
	$(VENV)/bin/ruff check infra training tests bench
	$(VENV)/bin/ruff format --check infra tests
	cd infra && ../$(VENV)/bin/mypy tfk8s
	cd training && ../$(VENV)/bin/mypy tfk8s_train

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
