# The single entry point: set-up, local cluster, deploy, test, bench.
#   make up     - install everything needed, start the local cluster, `pulumi up` the platform-dev
#                 platform stack, the tenant-alice tenant stack and then, as alice, the dev experiment stack
#   eval "$(make env)" - then plain `pulumi` commands work on stacks/ (see docs/guide/usage.md)
#   make test   - the whole test suite (unit with mocks, real TensorFlow, real pulumi up on kwok)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
# The launcher and the modules it imports: they run in stock TF 1.x images (Python 3.6), checked by vermin.
LAUNCHER_MODULES := launch.py atomic_file.py run_lineage.py kube_retire.py job_watch.py task_watch.py task_log.py task_progress.py task_metrics.py event_files.py
PY := $(VENV)/bin/python
STACK ?= dev
PLATFORM ?= platform-dev
TENANT ?= tenant-alice
# Who runs the $(STACK) experiment: a user of $(TENANT)'s identities, with her own state,
# passphrase and client certificate (hack/env.sh --tenant), never the platform team's.
EXPERIMENTER ?= alice
PYTEST_ARGS ?=

.PHONY: help env requirements schema docs-reference docs docs-diagrams golden sdk venv policy-venv test-policies tools tools-test tools-legacy real-node-deps cluster cluster-stop cluster-status demo up up-real-node preview down outputs status logs apply-fleet fleet-base test test-unit test-training test-e2e bench lint wheel clean

help: ## List the targets you would type, with what each does
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

# The program's own dependencies come from requirements.txt, the file `pulumi install` reads
# (generated from pyproject.toml); the training and test extras on top. Reinstalled when the
# release changes too (infra/tfk8s/release.py): the installed metadata carries its version.
$(VENV)/.installed: pyproject.toml requirements.txt infra/tfk8s/release.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -e '.[training,dev]'
	touch $@

venv: $(VENV)/.installed ## Python virtualenv with every dependency

# The policy pack's own virtualenv: pulumi-policy pins protobuf 5, the project's TensorFlow needs 6.
POLICY_VENV := policies/.venv
$(POLICY_VENV)/.installed: policies/requirements.txt
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/python -m pip install -q --upgrade pip
	$(POLICY_VENV)/bin/python -m pip install -q -r policies/requirements.txt
	touch $@

policy-venv: $(POLICY_VENV)/.installed ## The policy pack's virtualenv (policies/, docs/security.md "Policy as code")

requirements: ## Regenerate requirements.txt from pyproject.toml
	$(PYTHON) hack/requirements.py

schema: venv ## Regenerate schema/*.schema.json (the stack files' JSON Schema) from the models in infra/tfk8s/settings/
	$(PY) hack/schema.py

docs-reference: venv ## Regenerate docs/reference/<kind>.md (the configuration reference) from the same models
	$(PY) hack/docs_reference.py

docs: venv ## Build the docs site into site/ (mkdocs, strict: a broken link or anchor fails); open site/index.html
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The diagrams' sources are docs/img/*.mmd; mermaid-cli (npm) draws them with the machine's
# Chromium, so the site needs no JavaScript from a CDN to show them.
MERMAID_CLI := @mermaid-js/mermaid-cli@11.17.0
docs-diagrams: ## Redraw docs/img/*.svg from docs/img/*.mmd (needs npm and chromium)
	mkdir -p .state && echo '{"executablePath":"$(shell command -v chromium || command -v chromium-browser)","args":["--no-sandbox"]}' >.state/puppeteer.json
	for f in docs/img/*.mmd; do PUPPETEER_SKIP_DOWNLOAD=1 npx --yes $(MERMAID_CLI) -p .state/puppeteer.json \
	  -c docs/img/mermaid.json -b white -i "$$f" -o "$${f%.mmd}.svg" >/dev/null || exit 1; done

golden: venv ## Regenerate tests/unit/golden/ (every stack's manifests under mocks) after a change meant to change them
	TFK8S_UPDATE_GOLDEN=1 $(PY) -m pytest tests/unit/test_golden_manifests.py tests/unit/test_package.py tests/unit/test_stateful_identity.py -q

# The component package's typed SDKs are not committed: generated from package/schema.json (itself
# generated and checked current by a unit test) here and by tests/sdk, so they cannot drift from the
# schema and a model change does not churn hundreds of generated lines in review.
# A Go SDK's import path is where its user puts it: SDK_GO_IMPORT_BASE (else example.com/pulumi-tfk8s/...).
SDK_LANGUAGES ?= python,nodejs
SDK_GO_IMPORT_BASE ?=
sdk: ## Generate the component package's SDKs into out/sdk/<language> (SDK_LANGUAGES=python,nodejs; add go with SDK_GO_IMPORT_BASE)
	hack/tools.sh gensdk
	$(TOOLS_BIN)/gensdk --schema package/schema.json --out out/sdk --language $(SDK_LANGUAGES) $(if $(SDK_GO_IMPORT_BASE),--go-import-base $(SDK_GO_IMPORT_BASE))

env: ## Print the environment for plain `pulumi` commands: eval "$$(make env)"
	@hack/env.sh

tools: ## Build or find what `make up` needs: the pinned Pulumi CLI, its language host, the Kubernetes provider, kube binaries, etcd, kwok
	hack/tools.sh main

tools-test: ## Build or find what only the tests use besides: the Pulumi YAML host, the SDK generator, cyclonus, versitygw, actionlint, Prometheus, Kueue, JobSet
	hack/tools.sh test

# The real node's Debian packages (root) and binaries (kubelet, kube-proxy, CoreDNS). Where the
# machine cannot run one, this says why and the real-node tests fail with that reason.
real-node-deps: ## What a real node beside the simulated ones needs (lab/realnode.sh; docs/operations/real-node.md)
	@if [ "$$(id -u)" = 0 ]; then lab/realnode.sh install; fi
	@lab/realnode.sh check || true
	hack/tools.sh node

tools-legacy: ## Build the seed's environment for the tests that need it: Kubernetes 1.25 binaries and Heketi v9
	hack/tools.sh kube-legacy
	lab/heketi.sh build >/dev/null

cluster: tools ## Start the local kwok cluster (idempotent)
	hack/cluster.sh start

cluster-stop: ## Stop the local cluster
	hack/cluster.sh stop

cluster-status: ## Show the local cluster's nodes
	hack/cluster.sh status

# The deploy targets are thin wrappers over the plain CLI, in the environment `make env` prints.
PULUMI := eval "$$(hack/env.sh)" && pulumi
# They run the demo stacks ($(PLATFORM), $(STACK)) from a copy of the project under $(DEMO)
# (git-ignored), refreshed from the tracked files each time: Pulumi writes a stack's encryption
# salt into its stack file, and that salt belongs to this machine's passphrase, not to the
# repository (docs/guide/usage.md "Secrets and the passphrase"). Same backend, so plain `pulumi` commands at
# the repository root see the same stacks.
DEMO := .state/demo
DEMO_PULUMI := $(PULUMI) --cwd $(DEMO)

demo: venv ## Refresh .state/demo, the copy of the project make up, preview and down run the repository's stacks from
	@$(PY) hack/project.py project-copy $(DEMO) >/dev/null

# A tenant stack the demo creates shares its platform's salt (hack/project.py share-salt;
# docs/benchmarks.md "Fixed cost"): one key derivation per command instead of two.
DEMO_SELECT = $(PY) hack/project.py share-salt $(DEMO)/stacks/Pulumi.$(1).yaml >/dev/null && $(DEMO_PULUMI) stack select --create $(1) >/dev/null
# The experiment is $(EXPERIMENTER)'s: her environment, her state, her credentials. In a subshell
# where the team's commands follow on one line: env.sh --tenant sets hers, whatever the team's shell had.
EXPERIMENTER_PULUMI := eval "$$(hack/env.sh --tenant $(EXPERIMENTER))" && pulumi --cwd $(DEMO)

up: venv tools cluster demo ## `pulumi up` the $(PLATFORM) platform, the $(TENANT) tenant on it, then the $(STACK) experiment (refreshing first: the cluster may be new); print the experiment's outputs
	$(call DEMO_SELECT,$(PLATFORM))
	$(DEMO_PULUMI) up --stack $(PLATFORM) --yes --skip-preview --refresh
	$(call DEMO_SELECT,$(TENANT))
	$(DEMO_PULUMI) up --stack $(TENANT) --yes --skip-preview --refresh
	hack/cluster.sh user-kubeconfig $(EXPERIMENTER) >/dev/null
	$(EXPERIMENTER_PULUMI) stack select --create $(STACK) >/dev/null
	$(EXPERIMENTER_PULUMI) up --stack $(STACK) --yes --skip-preview --refresh
	$(EXPERIMENTER_PULUMI) stack output --stack $(STACK) --json
	@$(EXPERIMENTER_PULUMI) stack output --stack $(STACK) ready | grep -qx true || { echo "stack $(STACK) is not ready (see notReady above)" >&2; exit 3; }

# The real node's packages need root; without them this says what is missing and stops.
up-real-node: venv tools real-node-deps demo ## As `make up`, with this machine's real node (root) as the User Node and the training node at once: the $(STACK) experiment trains for real and `make status WATCH=1` moves (lab/demo_real_node.py)
	$(PY) lab/demo_real_node.py

preview: venv tools cluster demo ## Preview the $(STACK) stack, as $(EXPERIMENTER)
	hack/cluster.sh user-kubeconfig $(EXPERIMENTER) >/dev/null
	$(EXPERIMENTER_PULUMI) stack select --create $(STACK) >/dev/null
	$(EXPERIMENTER_PULUMI) preview --stack $(STACK) --diff

outputs: demo ## Print the outputs of the $(STACK) stack (secrets masked)
	$(EXPERIMENTER_PULUMI) stack output --stack $(STACK) --json

# `tfk8s status` and `tfk8s logs` (docs/guide/status.md) as $(EXPERIMENTER) would type them: her
# environment finds the stack's TensorBoard, her kubeconfig her tenant's token.
EXPERIMENTER_ENV := hack/cluster.sh user-kubeconfig $(EXPERIMENTER) >/dev/null && eval "$$(hack/env.sh --tenant $(EXPERIMENTER))"
TFK8S_CLI := $(EXPERIMENTER_ENV) && $(PY) -m tfk8s.cli

# Where $(STACK)'s file is: the demo copy for the repository's stacks (their salted files), the
# checkout for a stack of the user's own (`pulumi stack init` at the root, as docs/guide/usage.md does).
STACK_CWD = $(if $(wildcard $(DEMO)/stacks/Pulumi.$(STACK).yaml),$(DEMO),.)

status: venv demo ## Progress of the $(STACK) experiment's clusters, as $(EXPERIMENTER): a bar each, step/target, steps/s, ETA (WATCH=1 refreshes until they finish)
	$(TFK8S_CLI) status --stack $(STACK) --cwd $(STACK_CWD) $(if $(WATCH),--watch)

logs: venv demo ## A task's log in the $(STACK) experiment, kept after its pod is gone: CLUSTER=mnist TASK=worker-0 [RUN=<uid>] [TAIL=<lines>]
	@test -n "$(CLUSTER)" && test -n "$(TASK)" || { echo "make logs: which task? e.g. make logs CLUSTER=mnist TASK=worker-0 (TAIL=100, RUN=<uid> from make status)" >&2; exit 2; }
	$(TFK8S_CLI) logs --stack $(STACK) --cwd $(STACK_CWD) --cluster $(CLUSTER) --task $(TASK) $(if $(RUN),--run $(RUN)) $(if $(TAIL),--tail $(TAIL))

down: demo ## Destroy the $(STACK) experiment (as $(EXPERIMENTER)), the $(TENANT) tenant, then the $(PLATFORM) platform, and stop the local cluster
	if hack/cluster.sh status >/dev/null 2>&1; then hack/cluster.sh user-kubeconfig $(EXPERIMENTER) >/dev/null && ($(EXPERIMENTER_PULUMI) destroy --stack $(STACK) --yes) && $(DEMO_PULUMI) destroy --stack $(TENANT) --yes && $(DEMO_PULUMI) destroy --stack $(PLATFORM) --yes; fi
	hack/cluster.sh stop

# A platform team's fleet (docs/guide/gitops.md "Fleets"): every stack the commits since BASE touch
# (a thousand new tenants, a program change: every stack), PARALLEL at once where the plan's order
# allows, from this checkout at its HEAD, with the team's state, passphrase and kubeconfig in the
# environment (hack/gitops.sh refuses to run without them). GITOPS_ARGS: more of `apply`'s flags
# (--confirm-destroy STACK, --force-conflicts, --lock-wait S).
# PARALLEL: the machine's cores by default; a stack's step keeps a core busy (its CLI, program,
# provider and policy pack), so on 2 cores 2 at once was fastest (docs/benchmarks.md "A fleet").
BASE ?=
PARALLEL ?= $(shell nproc 2>/dev/null || echo 2)
GITOPS_ARGS ?=
apply-fleet: fleet-base venv policy-venv tools ## Apply every stack the commits since BASE touch, PARALLEL (default: the cores) at once where the order allows, as the GitOps pipeline: make apply-fleet BASE=<sha> [PARALLEL=2] [SUMMARY=fleet.md]
	hack/gitops.sh apply --base $(BASE) --parallel $(PARALLEL) $(if $(SUMMARY),--summary $(SUMMARY)) $(GITOPS_ARGS)

# First, before anything is built: a fleet's apply without BASE is a usage error.
fleet-base:
	@test -n "$(BASE)" || { echo "make apply-fleet: since which commit? BASE=<sha> (BASE=$$(printf '0%.0s' {1..40}): every stack file, a first push)" >&2; exit 2; }

# The tests' own tools (tools-test, tools-legacy, real-node-deps, the real node's images) are built
# in the background while the tests that need none of them run (lab/suite.py); the suites run
# TEST_WORKERS pytest processes at once (docs/tests.md "How the suite runs"). TFK8S_STAGES: a file
# each stage's record is appended to (.ci/run's table).
TEST_WORKERS ?= 3
test: venv policy-venv tools ## Every test: the policy pack's rules, mocks, real TensorFlow processes, real pulumi up against kwok (1.34 and 1.25 + Heketi), a real node; the tests' tools built beside them
	$(PY) lab/suite.py --workers $(TEST_WORKERS) $(if $(TFK8S_STAGES),--stages $(TFK8S_STAGES)) $(if $(TFK8S_STAGES_EPOCH),--epoch $(TFK8S_STAGES_EPOCH)) -- $(PYTEST_ARGS)

test-policies: policy-venv ## The policy pack's rules, each with a violating and a passing case (seconds)
	$(POLICY_VENV)/bin/python -m pytest policies/tests -q -p no:cacheprovider

test-unit: venv ## Mock-based unit tests only (seconds)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-training: venv ## Real TensorFlow processes on loopback
	$(PY) -m pytest tests/training $(PYTEST_ARGS)

test-e2e: venv policy-venv tools ## Real pulumi up/destroy against throwaway kwok clusters (each module builds the tools it needs)
	$(PY) -m pytest tests/e2e -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

bench: venv ## The benchmarks that need no cluster (see docs/benchmarks.md)
	$(PY) bench/program_eval.py
	$(PY) bench/input_pipeline.py
	$(PY) bench/training_throughput.py

# Where hack/tools.sh keeps the toolchain (the same default as hack/env.sh).
TOOLS_BIN := $(or $(TFK8S_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tfk8s)/bin

lint: venv ## ruff, mypy, the layers' import contracts (pyproject.toml), gofmt and go vet (the language host, the SDK generator), actionlint on the GitOps workflows, the docs site built strictly
	$(VENV)/bin/ruff check infra training tests bench hack lab policies examples package
	$(VENV)/bin/ruff format --check infra tests hack lab policies examples package
	$(VENV)/bin/mypy hack/langhost hack/requirements.py hack/schema.py hack/package_args.py hack/docs_reference.py hack/project.py lab/toolenv.py lab/realnode.py lab/queue_stacks.py lab/images.py lab/dashboards.py lab/kms.py lab/suite.py lab/demo_real_node.py lab/doc_blocks.py
	cd hack/langhost && test -z "$$(gofmt -l .)" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go vet -trimpath -gcflags=all=-dwarf=false .
	cd hack/gensdk && test -z "$$(gofmt -l .)" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go vet -trimpath -gcflags=all=-dwarf=false .
	test -z "$$(gofmt -l lab/realnode/coredns)"
	# The launcher and what it imports run in TF 1.x images: Python 3.6 and newer.
	$(VENV)/bin/vermin --target=3.6- --no-tips --violations --eval-annotations $(addprefix training/tfk8s_train/,$(LAUNCHER_MODULES))
	cd infra && ../$(VENV)/bin/mypy tfk8s tfk8s_gitops
	PYTHONPATH=infra $(VENV)/bin/lint-imports
	cd training && ../$(VENV)/bin/mypy tfk8s_train
	hack/tools.sh actionlint
	$(TOOLS_BIN)/actionlint .github/workflows/*.yml
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

wheel: venv ## Build the tfk8s wheel (the library: docs/guide/library.md) into dist/
	$(PY) -m pip wheel . --no-deps --no-build-isolation -q -w dist

clean: ## Remove the virtualenvs, caches and build outputs of this checkout (not the toolchain's cache)
	rm -rf $(VENV) $(POLICY_VENV) .pytest_cache .ruff_cache .import_linter_cache build dist
