#!/usr/bin/env bash
# Builds (or finds) the pinned toolchain tfk8s needs for a real `pulumi up` against a local
# Kubernetes API: the Pulumi CLI, the Kubernetes provider, kube-apiserver & co, etcd and kwok.
#
# Why from Go modules: this machine reaches the Go module proxy but not GitHub releases or
# get.pulumi.com. Every binary is cached by version under $TFK8S_CACHE/tools and linked into
# $TFK8S_CACHE/bin; a second run only re-links. A tool already on PATH at the pinned version is
# used as it is.
#
# Usage: hack/tools.sh [main|test|all|toolchain-module|pulumi|langhost|yaml-host|gensdk|provider|kwok|etcd|kube|kube-legacy|node|cyclonus|versitygw|local-kms|actionlint|prometheus|kueue|jobset]   (default: all)
# `main` is what `make up` needs; `test`, `kube-legacy` and `node` only the workshop (lab/README.md):
# the tests' and lint's tools, the Kubernetes 1.25 of the legacy tests (beside lab/heketi.sh), and
# what the real node runs (lab/realnode.sh). `kueue` and `jobset` are built by
# `hack/cluster.sh start --queueing` when a cluster first asks for them (and by `test`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.sh
source "$here/versions.sh"

cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}
tools=$cache/tools
bin=$cache/bin
work=$cache/build
# Pulumi's plugin cache for this toolchain (hack/env.sh exports it as PULUMI_HOME).
pulumi_home=$cache/pulumi-home
mkdir -p "$tools" "$bin" "$work"

# Some pinned modules (the Kubernetes provider at a commit, older Pulumi releases) have no
# checksum-database entry; the proxy still serves them, so verification is turned off here only.
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=auto CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}

# A cold machine spends most of its CI compiling these tools, on both cores, so compile CPU is
# what the builds below save (docs/tests.md): the compiler's collector at GOGC=400 instead of 100
# (the compiler allocates much and lives briefly), and no DWARF (every binary here is stripped by
# -ldflags "-s -w", so the compiler's debug info was thrown away at link). kwok on an empty build
# cache, side by side: 0.82 of the CPU (bench/compile_flags.sh; docs/benchmarks.md). GOMEMLIMIT
# keeps the largest packages' heaps bounded (a soft limit: the collector runs more often near it). These override
# what hack/env.sh exports for pulumi's runs: a build is not one. go vet and go test pass the same
# -gcflags (Makefile lint, lab/suite.py), so they reuse the packages built here.
export GOGC=400 GOMEMLIMIT=3GiB
GO_GCFLAGS="all=-dwarf=false"

log() { printf '[tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# once NAME COMMAND...: COMMAND (a build_* function) holding NAME's lock, in a subshell (the builds
# cd). Several runs of this script at once are safe and build each tool once: `make test` builds
# the tests' tools in the background while the tests that need them ask for them too (lab/suite.py);
# a second asker waits for the first, then finds the tool cached.
locks=$cache/locks
mkdir -p "$locks"
once() {
  local name=$1
  shift
  (
    if ! flock -n 9; then
      # Someone waits for this tool now: a build the background lane runs under `nice` (lab/suite.py)
      # gets the waiter's priority, or the waiting test waits on the tests beside it.
      hurry "$(cat "$locks/$name.pid" 2>/dev/null)" "$(nice)"
      flock 9
    fi
    echo "$BASHPID" >"$locks/$name.pid"
    local start=$SECONDS
    "$@"
    spent "$name" "$start"
  ) 9>"$locks/$name.lock"
}

# spent NAME START: when NAME's build took the cores at all, its seconds and CPU-seconds (user and
# system time of the processes it ran, from `times`): what a cold CI's table cannot say, as builds
# overlap there (docs/tests.md).
spent() {
  local cpu
  # Into a file: `times` in a command substitution would count that subshell's children, none.
  times >"$locks/$1.times"
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$locks/$1.times")
  if [ "$cpu" -gt 1 ]; then log "$1: $((SECONDS - $2)) s, $cpu CPU-s"; fi
}

# hurry PID NICENESS: PID and its descendants at NICENESS (what they start from now on inherits it).
# Lowering a niceness needs root; anyone else just waits.
hurry() {
  local pid=$1 level=$2 child
  [ -n "$pid" ] && renice -n "$level" -p "$pid" >/dev/null 2>&1 || return 0
  for child in $(pgrep -P "$pid"); do hurry "$child" "$level"; done
}

# link NAME DIR: expose DIR/NAME as $bin/NAME.
link() { ln -sfn "$2/$1" "$bin/$1"; }

# have_on_path NAME WANT: true if NAME on PATH (outside our cache) prints version WANT.
have_on_path() {
  local path
  path=$(PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$bin" | paste -sd:) command -v "$1" 2>/dev/null) || return 1
  "$path" version 2>/dev/null | grep -qF "$2" || "$path" --version 2>/dev/null | grep -qF "$2" || return 1
  ln -sfn "$path" "$bin/$1"
  log "$1: using $path ($2)"
}

# scratch_module DIR: a throwaway module to build other modules' commands from.
scratch_module() {
  rm -rf "$1" && mkdir -p "$1"
  printf 'module tfk8s.local/build\n\ngo 1.25\n' >"$1/go.mod"
}

# pulumi_replaces: in the scratch module of the current directory, Pulumi's pkg and sdk at the CLI's
# release with their non-relative replace directives (pkg/go.mod replaces sdk with ../sdk and pins
# a clipboard fork): what a module that builds against the CLI's packages needs.
pulumi_replaces() {
  go mod download "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION"
  grep -hE '^replace .* => [^.]' \
    "$GOMODCACHE/cache/download/github.com/pulumi/pulumi/pkg/v3/@v/v$PULUMI_VERSION.mod" \
    "$GOMODCACHE/cache/download/github.com/pulumi/pulumi/sdk/v3/@v/v$PULUMI_VERSION.mod" >>go.mod || true
}

build_pulumi() {
  local dest=$tools/pulumi-$PULUMI_VERSION
  if from_toolchain "$dest/pulumi"; then link pulumi "$dest"; return; fi
  have_on_path pulumi "v$PULUMI_VERSION" && return
  log "pulumi $PULUMI_VERSION: building the CLI (10-20 min cold)"
  toolchain_build "$dest" pulumi -tags osusergo,grpcnotrace \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
  link pulumi "$dest"
  log "pulumi $PULUMI_VERSION: done"
}

# Our Python language host (hack/langhost, see its main.go): a Go executable installed next to the
# CLI, where the CLI looks for `pulumi-language-python`, never declared in Pulumi.yaml (users of
# the official installers keep the official host), with the program runner it starts
# (run_program.py, run by each project's own interpreter) in `langhost/` beside it. Rebuilt when
# its sources change (seconds: the CLI's build leaves the modules it needs in the cache).
# build_checked_in DIR BINARY STAMP: build hack/DIR, a Go module of this repository, into BINARY
# when its sources differ from the ones STAMP records (seconds: the modules are in the cache).
build_checked_in() {
  local module=$here/$1 binary=$2 stamp=$3 sources
  sources=$(cd "$module" && cat go.mod go.sum ./*.go | sha256sum | cut -d' ' -f1)
  if [ -x "$binary" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sources" ]; then return; fi
  log "$(basename "$binary"): building hack/$1"
  # The checked-in go.sum, never updated here (a build must not change the checkout).
  (cd "$module" && GOFLAGS=-mod=readonly go build -trimpath -gcflags "$GO_GCFLAGS" -ldflags "-s -w" -o "$binary.tmp" .)
  mv "$binary.tmp" "$binary"
  printf '%s\n' "$sources" >"$stamp"
}

build_langhost() {
  local dest=$tools/pulumi-$PULUMI_VERSION
  local cli
  cli=$(readlink -f "$bin/pulumi")
  if [ "$(dirname "$cli")" != "$dest" ] && [ -x "$(dirname "$cli")/pulumi-language-python" ]; then
    log "pulumi-language-python: the CLI at $cli has its own host; not installing ours"
    return
  fi
  mkdir -p "$dest/langhost"
  build_checked_in langhost "$dest/pulumi-language-python" "$dest/langhost/host.sha256"
  # Copied, not linked: the runner must not change under a running CLI when the checkout does.
  # Renamed into place, and only when it changed: every cluster's start runs this while other
  # stacks' hosts may be starting it (`install` removes the file before it writes the new one).
  if ! cmp -s "$here/langhost/run_program.py" "$dest/langhost/run_program.py"; then
    install -m644 "$here/langhost/run_program.py" "$dest/langhost/run_program.py.tmp"
    mv -f "$dest/langhost/run_program.py.tmp" "$dest/langhost/run_program.py"
  fi
  # The Python host's files and virtualenv, from before the host was Go.
  rm -f "$dest/langhost/host.py" "$dest/langhost/toolchain.py"
  rm -rf "$tools/langhost-venv-$PULUMI_VERSION"
  link pulumi-language-python "$dest"
}

# The Pulumi YAML language host (issue 39: YAML programs that add tfk8s's component package).
# Built in the toolchain module, so it reuses the CLI's compiled packages, and linked next to the
# CLI, where the CLI looks for language hosts. v1.38.1 because `pulumi package
# add` calls the host's Link, which pulumi-yaml has only since v1.26.2 (the proxy serves v1.38.1
# by version although its list stops at v1.25.0).
build_yaml_host() {
  local dest=$tools/pulumi-language-yaml-$PULUMI_YAML_VERSION
  if ! from_toolchain "$dest/pulumi-language-yaml"; then
    log "pulumi-language-yaml $PULUMI_YAML_VERSION: building (a few minutes after the CLI)"
    toolchain_build "$dest" pulumi-language-yaml -tags osusergo,grpcnotrace \
      -ldflags "-s -w -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$PULUMI_YAML_VERSION" \
      github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml
    log "pulumi-language-yaml: done"
  fi
  # Next to our CLI only: a CLI of the official installers (found on PATH) has its own YAML host.
  local cli
  cli=$(readlink -f "$bin/pulumi")
  if [ "$(dirname "$cli")" != "$tools/pulumi-$PULUMI_VERSION" ]; then
    log "pulumi-language-yaml: the CLI at $cli is not ours; it uses the YAML host installed beside it"
    return
  fi
  ln -sfn "$dest/pulumi-language-yaml" "$(dirname "$cli")/pulumi-language-yaml"
}

# hack/gensdk (see its main.go): writes the component package's typed SDKs from package/schema.json
# with the codegen of the CLI's pulumi release, for `make sdk` and tests/sdk; only they use it, so
# `test` builds it, never `main`. Rebuilt when its sources change (about 15 s once the CLI is built:
# the codegen packages are in the build cache; minutes on a cold cache).
build_gensdk() {
  local dest=$tools/gensdk
  mkdir -p "$dest"
  build_checked_in gensdk "$dest/gensdk" "$dest/gensdk.sha256"
  link gensdk "$dest"
}

# The provider is registered in tfk8s's PULUMI_HOME under the version the Python SDK asks for,
# and deliberately not linked into $bin: a provider on PATH would shadow the registered plugin
# (with a warning on every command).
build_provider() {
  local dest=$tools/pulumi-resource-kubernetes-$K8S_PROVIDER_VERSION
  if ! from_toolchain "$dest/pulumi-resource-kubernetes"; then
    log "pulumi-resource-kubernetes $K8S_PROVIDER_VERSION: building from $K8S_PROVIDER_MODULE_VERSION (10-20 min cold)"
    toolchain_build "$dest" pulumi-resource-kubernetes \
      -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$K8S_PROVIDER_VERSION" \
      github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes
    log "pulumi-resource-kubernetes: built"
  fi
  rm -f "$bin/pulumi-resource-kubernetes"
  local plugin=$pulumi_home/plugins/resource-kubernetes-v$K8S_PROVIDER_VERSION
  if ! cmp -s "$dest/pulumi-resource-kubernetes" "$plugin/pulumi-resource-kubernetes"; then
    # A provider built from another toolchain module is replaced, not kept beside the new one.
    rm -rf "$plugin" "$plugin.lock" "$plugin.lastused"
    PULUMI_HOME=$pulumi_home PULUMI_SKIP_UPDATE_CHECK=true "$bin/pulumi" plugin install resource kubernetes \
      "$K8S_PROVIDER_VERSION" --file "$dest/pulumi-resource-kubernetes" >&2
    log "pulumi-resource-kubernetes: registered in $pulumi_home"
  fi
}

build_kwok() {
  local dest=$tools/kwok-$KWOK_VERSION
  if [ -x "$dest/kwokctl" ] && [ -x "$dest/kwok" ]; then link kwok "$dest"; link kwokctl "$dest"; return; fi
  have_on_path kwokctl "$KWOK_VERSION" && have_on_path kwok "$KWOK_VERSION" && return
  log "kwok $KWOK_VERSION: building kwok and kwokctl"
  mkdir -p "$dest.tmp"
  GOBIN=$dest.tmp go install -trimpath -gcflags "$GO_GCFLAGS" -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  link kwok "$dest"; link kwokctl "$dest"
  log "kwok: done"
}

# cyclonus: a NetworkPolicy engine that computes the allow/deny matrix of live policies offline.
# Built on Kueue's module versions (beside_kueue): Kubernetes' client libraries 0.30 -> 0.35, which
# it compiles against; 35 packages of its own instead of its whole graph.
build_cyclonus() { beside_kueue cyclonus "$CYCLONUS_VERSION" github.com/mattfenwick/cyclonus github.com/mattfenwick/cyclonus/cmd/cyclonus; }

# versitygw: an S3 server over a directory, for the GitOps tests' shared state (docs/guide/gitops.md).
build_versitygw() { go_install versitygw "$VERSITYGW_VERSION" github.com/versity/versitygw/cmd/versitygw; }

# local-kms: the AWS KMS API over a directory, the GitOps tests' and the fleet bench's secrets
# provider in place of a passphrase (awskms://...&endpoint=...).
build_local_kms() { go_install local-kms "$LOCAL_KMS_VERSION" github.com/nsmithuk/local-kms; }

# actionlint: lints .github/workflows (make lint).
build_actionlint() { go_install actionlint "$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint; }

# kueue and jobset: the batch admission of training clusters (issue 38; hack/queueing.sh runs them).
build_kueue() { go_install kueue "$KUEUE_VERSION" sigs.k8s.io/kueue/cmd/kueue; }
# JobSet, built on Kueue's module versions (beside_kueue): Kueue requires this very JobSet. It keeps
# the controller-runtime it was written for: Kueue's is a minor release ahead and changed a call
# JobSet makes (ctrl.NewWebhookManagedBy).
build_jobset() { beside_kueue jobset "$JOBSET_VERSION" sigs.k8s.io/jobset sigs.k8s.io/jobset sigs.k8s.io/controller-runtime; }

# beside_kueue NAME VERSION MODULE PACKAGE [KEEP...]: a test-only tool built from a scratch module
# that requires MODULE@VERSION and the Kueue the tests run: the build takes Kueue's versions of the
# modules they share (Kubernetes' libraries, gRPC, OpenTelemetry...), whose packages Kueue's build
# compiles too, so they are compiled once for all three. JobSet alone compiled about 800 packages,
# beside Kueue 62. Each KEEP module stays at the version MODULE's own go.mod requires. (A scratch
# module also spares `go install MODULE@VERSION`'s read of the module's version list, which the
# proxy refuses for JobSet.) The cache's name says so.
beside_kueue() {
  local name=$1 version=$2 module=$3 package=$4
  shift 4
  local dest=$tools/$name-$version-kueue-$KUEUE_VERSION
  if [ -x "$dest/$name" ]; then link "$name" "$dest"; return; fi
  log "$name $version: building on Kueue $KUEUE_VERSION's modules"
  local mod=$work/$name kept own
  scratch_module "$mod"
  (
    cd "$mod"
    go get "$module@$version" "sigs.k8s.io/kueue@$KUEUE_VERSION"
    own=$(go mod download -json "$module@$version" | awk -F'"' '$2 == "GoMod" { print $4 }')
    for kept in "$@"; do
      go mod edit -replace "$kept=$kept@$(awk -v m="$kept" '$1 == m { print $2 }' "$own")"
    done
    mkdir -p "$dest.tmp"
    go build -trimpath -gcflags "$TEST_TOOL_GCFLAGS" -ldflags "-s -w" -o "$dest.tmp/$name" "$package"
  )
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  link "$name" "$dest"
  log "$name: done"
}

# prometheus: scrapes a real training run on the real node (tests/e2e/test_real_observability.py);
# lab/images.py wraps this binary into the image the test runs in the monitoring namespace.
# Built with Kubernetes' service discovery alone (the scrape job's kubernetes_sd_configs): the
# other discoveries' cloud SDKs were half its build (155 s against 293 s on an empty build cache;
# the build tags of Prometheus' plugins/).
build_prometheus() {
  GO_TAGS=remove_all_sd,enable_kubernetes_sd go_install prometheus "$PROMETHEUS_VERSION-k8s-sd" \
    github.com/prometheus/prometheus/cmd/prometheus "$PROMETHEUS_VERSION"
}

# The tools only the tests and lint run (cyclonus, versitygw, local-kms, actionlint, Prometheus,
# Kueue, JobSet, the legacy control plane), against a handful of objects each, are compiled without
# optimisation or inlining: a fifth less compiler time (etcd on an empty build cache: 44 s against
# 54 s), and they build beside the tests on a cold machine. What `make up`, the default control
# plane and the real node run stays optimised (GO_GCFLAGS).
TEST_TOOL_GCFLAGS="all=-N -l -dwarf=false"

# go_install NAME VERSION PACKAGE [MODULE_VERSION]: one command of a module, cached under VERSION
# like the others (MODULE_VERSION, when the cache's name says more than the module's version), with
# the build tags in GO_TAGS; every caller is a test-only tool (TEST_TOOL_GCFLAGS).
go_install() {
  local name=$1 version=$2 package=$3 module_version=${4:-$2}
  local dest=$tools/$name-$version
  if [ -x "$dest/$name" ]; then link "$name" "$dest"; return; fi
  log "$name $version: building"
  mkdir -p "$dest.tmp"
  GOBIN=$dest.tmp go install -trimpath -tags "${GO_TAGS:-}" -gcflags "$TEST_TOOL_GCFLAGS" -ldflags "-s -w" "$package@$module_version"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  link "$name" "$dest"
  log "$name: done"
}

build_etcd() {
  local dest=$tools/etcd-$ETCD_VERSION
  if from_toolchain "$dest/etcd"; then link etcd "$dest"; return; fi
  have_on_path etcd "$ETCD_VERSION" && return
  log "etcd $ETCD_VERSION: building"
  toolchain_build "$dest" etcd -ldflags "-s -w" go.etcd.io/etcd/server/v3
  link etcd "$dest"
  log "etcd: done"
}

# module_lock NAME: the build module NAME to this (sub)shell alone until it exits: the tools built
# from one module (the toolchain's, or an older Kubernetes') take turns in it, and each holds only
# its own tool's lock besides, so that a cluster's start (`main`, all built) never waits for the
# node's build.
module_lock() {
  exec 8>"$locks/module-$1.lock"
  flock 8
}

# staging_replaces VERSION: in the module of the current directory, k8s.io/kubernetes@VERSION's
# staging modules at their published v0.N.M (k8s.io/kubernetes requires them at v0.0.0 and replaces
# them with ./staging, which its module zip does not have).
staging_replaces() {
  local version=$1
  go mod download "k8s.io/kubernetes@v$version"
  sed -nE 's#^\s*(k8s\.io/[^ ]+) => \./staging/.*#\1#p' \
    "$GOMODCACHE/cache/download/k8s.io/kubernetes/@v/v$version.mod" |
    while read -r m; do go mod edit -replace "$m=$m@v0.${version#1.}"; done
}

# The toolchain module: one Go module that every optimised tool of `make up` and of the real node is
# built from (the CLI and its YAML host, the provider, etcd, the control plane, kubelet, kube-proxy
# and kube-router). Built from modules of their own, each resolved the libraries they share to
# versions of its own (Kubernetes' 0.33 to 0.36, gRPC 1.71 to 1.83, Pulumi's SDK 3.215 and
# 3.259...) and compiled them again: here each has one version, compiled once, a third fewer
# packages (go list -deps: 4,243 against 6,558), and `main` then `node` on an empty build cache took
# 0.69 of the CPU (bench/toolchain_module.sh; docs/benchmarks.md). The shared versions are the highest any of them
# requires, except Kubernetes' libraries, which stay at the control plane's own (its staging
# replaces). kwok (Kubernetes' libraries 0.36) and CoreDNS (0.35) need newer ones than the control
# plane's and build in modules of their own.
#
# The provider's source is a copy (its generator writes the schema it embeds into its tree),
# required through a replace; at the CLI's Pulumi SDK its schema's Provider field is a pointer, which
# its one literal of that field is edited to take (the only change it needs to compile).
# Bump when toolchain_module's recipe changes: the key names the module and stamps what it built.
toolchain_recipe=1
toolchain_key() {
  printf '%s\n' "$toolchain_recipe" "$PULUMI_VERSION" "$PULUMI_YAML_VERSION" "$K8S_PROVIDER_MODULE_VERSION" \
    "$K8S_PROVIDER_VERSION" "$K8S_PROVIDER_SDK_GO_VERSION" "$KUBE_VERSION" "$ETCD_VERSION" \
    "$KUBE_ROUTER_VERSION" "$KUBE_ROUTER_NETLINK_VERSION" | sha256sum | cut -c1-12
}

# toolchain_module DIR: prepares the toolchain module in DIR (the caller holds module_lock toolchain).
toolchain_module() {
  local mod=$1
  log "toolchain module: preparing $mod"
  scratch_module "$mod"
  cd "$mod"
  staging_replaces "$KUBE_VERSION"
  pulumi_replaces
  # kube-router pins a netlink pseudo-version the proxy refuses: its newest release instead.
  go mod edit -replace "github.com/vishvananda/netlink=github.com/vishvananda/netlink@$KUBE_ROUTER_NETLINK_VERSION"
  local provider=github.com/pulumi/pulumi-kubernetes/provider/v4 sdk=github.com/pulumi/pulumi-kubernetes/sdk/v4
  go mod download "$provider@$K8S_PROVIDER_MODULE_VERSION"
  cp -r "$GOMODCACHE/$provider@$K8S_PROVIDER_MODULE_VERSION" provider && chmod -R u+w provider
  perl -pi -e 's/^(\t\tProvider: )(pschema\.ResourceSpec\{)/$1&$2/' provider/pkg/gen/schema.go
  if ! grep -q 'Provider: &pschema.ResourceSpec{' provider/pkg/gen/schema.go; then
    log "the provider's schema literal moved: edit toolchain_module"
    return 1
  fi
  # provider/go.mod points the SDK at ../sdk (a sibling directory in the repository, not in the
  # module zip); the released SDK module of the same version has the same Go code.
  (cd provider && go mod edit -replace "$sdk=$sdk@v$K8S_PROVIDER_SDK_GO_VERSION")
  go mod edit -require "$provider@v4.0.0" -replace "$provider=./provider" -replace "$sdk=$sdk@v$K8S_PROVIDER_SDK_GO_VERSION"
  go get "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION" \
    "github.com/pulumi/pulumi-yaml@$PULUMI_YAML_VERSION" "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" \
    "k8s.io/kubernetes@v$KUBE_VERSION" "github.com/cloudnativelabs/kube-router/v2@$KUBE_ROUTER_VERSION"
  # The generator, compiled here, takes the toolchain's versions of Pulumi's codegen (the CLI's).
  local generate=provider/cmd/pulumi-resource-kubernetes
  go build -trimpath -gcflags "$GO_GCFLAGS" -o generate "./$generate/generate.go"
  (cd "$generate" && VERSION=$K8S_PROVIDER_VERSION "$mod/generate")
  touch "$mod/.ready"
}

# from_toolchain BINARY: true if BINARY was built from the current toolchain module (its stamp).
from_toolchain() {
  [ -x "$1" ] && [ "$(cat "$(dirname "$1")/.$(basename "$1").toolchain" 2>/dev/null)" = "$(toolchain_key)" ]
}

# toolchain_build DEST NAME GO_BUILD_ARGS...: DEST/NAME built in the toolchain module (optimised,
# GO_GCFLAGS) and stamped with its key; the other files of DEST stay. In a subshell: it holds the
# module's lock only while it builds.
toolchain_build() {
  local dest=$1 name=$2
  shift 2
  (
    module_lock toolchain
    local mod
    mod=$work/toolchain-$(toolchain_key)
    if [ ! -f "$mod/.ready" ]; then toolchain_module "$mod" >&2; fi
    mkdir -p "$dest"
    cd "$mod"
    go build -trimpath -gcflags "$GO_GCFLAGS" -o "$dest/$name.tmp" "$@"
    mv "$dest/$name.tmp" "$dest/$name"
    toolchain_key >"$dest/.$name.toolchain"
  )
}

# kube_module VERSION: a build module for an older k8s.io/kubernetes@VERSION than the toolchain's
# (prepared once), on stdout.
kube_module() {
  local version=$1 mod=$work/kubernetes-$1
  if [ ! -f "$mod/.ready" ]; then
    scratch_module "$mod"
    (cd "$mod" && staging_replaces "$version" && go get "k8s.io/kubernetes@v$version") >&2
    touch "$mod/.ready"
  fi
  echo "$mod"
}

# kube_ldflags VERSION: the version stamps `kubectl version` and the API server report.
kube_ldflags() {
  local version=$1 minor=${1#1.} date ld="-s -w" pkg
  minor=${minor%%.*}
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  echo "$ld"
}

# build_kube: kube-apiserver & co at KUBE_VERSION, from the toolchain module, exposed in $bin with
# their kubectl (the default control plane).
build_kube() {
  local dest=$tools/kubernetes-$KUBE_VERSION c ld
  local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl) missing=()
  for c in "${cmds[@]}"; do from_toolchain "$dest/$c" || missing+=("$c"); done
  if [ ${#missing[@]} -gt 0 ]; then
    local found=0
    for c in "${cmds[@]}"; do have_on_path "$c" "v$KUBE_VERSION" && found=$((found + 1)); done
    [ $found = ${#cmds[@]} ] && return
    log "kubernetes $KUBE_VERSION: building ${missing[*]} (20-30 min cold)"
    ld=$(kube_ldflags "$KUBE_VERSION")
    for c in "${missing[@]}"; do
      log "kubernetes: building $c"
      toolchain_build "$dest" "$c" -tags selinux,notest,grpcnotrace -ldflags "$ld" "k8s.io/kubernetes/cmd/$c"
    done
    log "kubernetes $KUBE_VERSION: done"
  fi
  for c in "${cmds[@]}"; do link "$c" "$dest"; done
}

# build_kube_legacy: the Kubernetes 1.25 control plane of the legacy tests (hack/cluster.sh --kube),
# in a module of its own, left in $tools/kubernetes-VERSION without a kubectl (every script and
# test uses $bin's, which talks to 1.25 too). Only they start it, against a few objects: a test
# tool, compiled without optimisation (TEST_TOOL_GCFLAGS).
build_kube_legacy() {
  local version=$KUBE_LEGACY_VERSION dest=$tools/kubernetes-$KUBE_LEGACY_VERSION c
  local cmds=(kube-apiserver kube-controller-manager kube-scheduler) missing=0
  for c in "${cmds[@]}"; do [ -x "$dest/$c" ] || missing=1; done
  [ $missing = 0 ] && return
  log "kubernetes $version: building ${cmds[*]} (10 min cold)"
  module_lock "kubernetes-$version"
  local mod ld
  mod=$(kube_module "$version")
  ld=$(kube_ldflags "$version")
  cd "$mod"
  mkdir -p "$dest.tmp"
  for c in "${cmds[@]}"; do
    log "kubernetes: building $c"
    go build -trimpath -tags selinux,notest,grpcnotrace -gcflags "$TEST_TOOL_GCFLAGS" -ldflags "$ld" -o "$dest.tmp/$c" "k8s.io/kubernetes/cmd/$c"
  done
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  log "kubernetes $version: done"
}

# build_node: what a real node runs (lab/realnode.sh): kubelet and kube-proxy of the control
# plane's version (from the toolchain module), CoreDNS for the cluster's DNS and kube-router for
# its NetworkPolicies.
build_node() {
  local dest=$tools/kubernetes-node-$KUBE_VERSION c ld
  for c in kubelet kube-proxy; do
    if ! from_toolchain "$dest/$c"; then
      log "kubernetes $KUBE_VERSION: building $c (2 min warm)"
      ld=$(kube_ldflags "$KUBE_VERSION")
      toolchain_build "$dest" "$c" -tags selinux,notest,grpcnotrace -ldflags "$ld" "k8s.io/kubernetes/cmd/$c"
    fi
    link "$c" "$dest"
  done
  build_coredns
  build_kube_router
}

# CoreDNS with the real node's plugins alone (lab/realnode/coredns/main.go): its own main, which imports
# every plugin and the cloud SDKs behind them, took 149 s on an empty build cache, this 85 s.
# Rebuilt when main.go changes.
build_coredns() {
  local sources dest
  sources=$(sha256sum <"$here/../lab/realnode/coredns/main.go" | cut -c1-12)
  dest=$tools/coredns-$COREDNS_VERSION-$sources
  if [ -x "$dest/coredns" ]; then link coredns "$dest"; return; fi
  log "coredns $COREDNS_VERSION: building with the real node's plugins"
  local mod=$work/coredns
  scratch_module "$mod"
  cp "$here/../lab/realnode/coredns/main.go" "$mod/main.go"
  (cd "$mod" && go get "github.com/coredns/coredns@$COREDNS_VERSION" && mkdir -p "$dest.tmp" &&
    go build -trimpath -gcflags "$GO_GCFLAGS" -ldflags "-s -w" -o "$dest.tmp/coredns" .)
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  link coredns "$dest"
  log "coredns: done"
}

# kube-router: the real node's NetworkPolicy enforcer (iptables and ipsets; its router and service
# proxy stay off), from the toolchain module. Its go.mod pins a netlink pseudo-version the proxy
# refuses: the toolchain replaces it with a released netlink, and the binary's version says so.
build_kube_router() {
  local version=$KUBE_ROUTER_VERSION+netlink-$KUBE_ROUTER_NETLINK_VERSION
  local dest=$tools/kube-router-$version module=github.com/cloudnativelabs/kube-router/v2
  if ! from_toolchain "$dest/kube-router"; then
    log "kube-router $version: building (2 min cold)"
    toolchain_build "$dest" kube-router -ldflags "-s -w -X $module/pkg/version.Version=$version" "$module/cmd/kube-router"
    log "kube-router: done"
  fi
  link kube-router "$dest"
}

# What `make up` needs: the CLI, its language host and provider, and the local cluster.
build_main() {
  local tool
  for tool in pulumi provider kwok etcd kube; do build_one "$tool"; done
}
# What only the tests and lint use besides: the policy engine, the S3 server, the KMS, the workflow linter,
# Prometheus, Kueue and JobSet (the queueing e2e test's cluster: hack/cluster.sh start --queueing),
# and the SDK generator (tests/sdk, make sdk).
build_test() {
  local tool
  for tool in yaml-host gensdk cyclonus versitygw local-kms actionlint prometheus kueue jobset; do build_one "$tool"; done
}

# build_one TOOL: one tool (or group) of the usage line, under its lock.
build_one() {
  case $1 in
    pulumi) once pulumi build_pulumi; once langhost build_langhost ;;
    langhost) once langhost build_langhost ;;
    yaml-host) once yaml-host build_yaml_host ;;
    gensdk) once gensdk build_gensdk ;;
    provider) once provider build_provider ;;
    kwok) once kwok build_kwok ;;
    etcd) once etcd build_etcd ;;
    cyclonus) once cyclonus build_cyclonus ;;
    versitygw) once versitygw build_versitygw ;;
    local-kms) once local-kms build_local_kms ;;
    actionlint) once actionlint build_actionlint ;;
    prometheus) once prometheus build_prometheus ;;
    kueue) once kueue build_kueue ;;
    jobset) once jobset build_jobset ;;
    # The toolchain module has a lock of its own (module_lock), taken only to build.
    kube) once kube build_kube ;;
    kube-legacy) once kube-legacy build_kube_legacy ;;
    node) once node build_node ;;
  esac
}

main() {
  local what=${1:-all} start=$SECONDS
  case $what in
    # The toolchain module's directory, once prepared (its go.mod has the versions every optimised
    # tool was built with): a Go module of the tests that requires the same versions compiles none
    # of those packages again (tests/sdk/test_go_sdk.py).
    toolchain-module)
      local mod
      mod=$work/toolchain-$(toolchain_key)
      [ -f "$mod/.ready" ] && echo "$mod"
      return ;;
    main) build_main ;;
    test) build_test ;;
    all) build_main; build_test ;;
    pulumi | langhost | yaml-host | gensdk | provider | kwok | etcd | kube | kube-legacy | node | cyclonus | versitygw | local-kms | actionlint | prometheus | kueue | jobset)
      build_one "$what" ;;
    *) echo "usage: $0 [main|test|all|pulumi|langhost|yaml-host|gensdk|provider|kwok|etcd|kube|kube-legacy|node|cyclonus|versitygw|local-kms|actionlint|prometheus|kueue|jobset]" >&2; exit 2 ;;
  esac
  log "tools ready in $bin ($((SECONDS - start)) s)"
}

main "$@"
