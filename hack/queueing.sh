#!/usr/bin/env bash
# Kueue and JobSet as part of a local cluster (hack/cluster.sh start --queueing | stop | status):
# the batch admission of training clusters (issue 38; lab/kueue/README.md). Both run as host
# processes of that cluster, as kwokctl's binary runtime runs the control plane.
#
# Usage: TFK8S_CLUSTER_NAME=<name> hack/queueing.sh start | stop | status
#
# - Their CRDs are server-side applied from the pinned modules' manifests, before the controller
#   manager's garbage collector is restarted (see restart_controller_manager) and before they start.
# - The API server reaches their webhooks at https://127.0.0.1:<port>/<path> (the upstream
#   manifests' `service:` rewritten to `url:`, the cluster's CA as caBundle), served with a
#   certificate the cluster's CA signs for IP 127.0.0.1. Their internal cert managers are off: they
#   wait for a kubelet to mount a Secret and sign for a Service's DNS name only
#   (lab/kueue/facts-from-source.md §2).
# - Webhooks on every Pod, Job, Deployment or StatefulSet are dropped: they are `failurePolicy: Fail`,
#   so while Kueue or JobSet is down no pod or job could be created. Only JobSets and Kueue's own
#   kinds go through them.
# - Their webhook and health ports are free ports chosen at start, kept in the cluster's state
#   ($KWOK_WORKDIR/clusters/<name>/queueing, gone with the cluster), so clusters run side by side.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.sh
source "$here/versions.sh"
cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}
bin=$cache/bin
name=${TFK8S_CLUSTER_NAME:-tfk8s}
export KWOK_WORKDIR=$cache/kwok
kubeconfig=$KWOK_WORKDIR/$name.kubeconfig
cluster_dir=$KWOK_WORKDIR/clusters/$name
pki=$cluster_dir/pki
dir=$cluster_dir/queueing
# Their manifests, in the modules hack/tools.sh built them from (set by `start`: `stop` needs no Go).
kueue_src="" jobset_src=""
# Kueue loads its metrics certificate from this fixed path, even with metrics off, and exits
# without it (cmd/kueue/main.go:205-220 with internal certs off). It needs root (this machine runs
# as root, as lab/realnode.sh does). Shared by every cluster's Kueue and left in place by `stop`:
# a self-signed pair nothing verifies, since no metrics are served.
KUEUE_METRICS_CERTS=/etc/kueue/metrics/certs
PROCESSES=(jobset kueue)
export PATH=$bin:$PATH

log() { printf '[queueing %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
kubectl() { command "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# free_ports N: N free TCP ports on loopback, one a line.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in held))
EOF
}

certs() {
  mkdir -p "$dir/certs"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/certs/tls.key" -subj "/CN=127.0.0.1" -out "$dir/certs/tls.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >"$dir/certs/ext"
  openssl x509 -req -in "$dir/certs/tls.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -CAserial "$dir/certs/ca.srl" -days 30 -extfile "$dir/certs/ext" -out "$dir/certs/tls.crt" 2>/dev/null
  if [ ! -f "$KUEUE_METRICS_CERTS/tls.crt" ] || [ ! -f "$KUEUE_METRICS_CERTS/tls.key" ]; then
    mkdir -p "$KUEUE_METRICS_CERTS"
    local scratch
    scratch=$(mktemp -d "$KUEUE_METRICS_CERTS/.new.XXXXXX")
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kueue-metrics" \
      -keyout "$scratch/tls.key" -out "$scratch/tls.crt" 2>/dev/null
    # Renamed into place: another cluster's Kueue starting meanwhile never reads half a pair.
    mv -f "$scratch/tls.key" "$KUEUE_METRICS_CERTS/tls.key"
    mv -f "$scratch/tls.crt" "$KUEUE_METRICS_CERTS/tls.crt"
    rmdir "$scratch"
  fi
}

# configs KUEUE_WEBHOOK KUEUE_HEALTH JOBSET_WEBHOOK JOBSET_HEALTH
configs() {
  # - fairSharing: its presence turns fair sharing on; v1beta2 has no `enable` field
  #   (pkg/scheduler/preemption/fairsharing/strategy.go:50-52 `Enabled` is `pfs != nil`, passed to
  #   the cache and scheduler at cmd/kueue/main.go:313-314,564). preemptionStrategies is required
  #   when present (pkg/config/validation.go:335-356); both, in this order, is the fullest of the
  #   three sets it accepts (`validStrategySets`, validation.go:313-324). The ClusterQueues' weights and
  #   `reclaimWithinCohort` (tfk8s.specs.queueing) act only with it on.
  # - waitForPodsReady: on when the block is present (pkg/util/waitforpodsready/waitforpodsready.go:21-23).
  #   timeout (10m): an admitted training
  #   cluster whose pods are not all ready within it is evicted and requeued, so a partly scheduled
  #   cluster (quota is a number; 8 GPUs may sit as 4+4) gives its capacity back within that bound.
  # - recoveryTimeout runs once a ready cluster turns not-ready (a pod failed and its replacement is
  #   awaited: pkg/controller/jobframework/reconciler.go:1651-1655) and, when it expires, evicts the
  #   whole JobSet (pkg/controller/core/workload_controller.go:1274-1277). It defaults to `timeout`
  #   (apis/config/v1beta2/defaults.go:99). An ordinary retry waits out a back-off first: the Job
  #   controller's, up to 10 min per failed pod (k8s pkg/controller/job/job_controller.go:70-72,
  #   MaxJobPodFailureBackOff), or the kubelet's crash back-off for a restarting PS, up to 5 min
  #   (k8s pkg/kubelet/apis/config/v1beta1/defaults.go:46). 20m outlasts both plus a start, so
  #   only a pod that stays unschedulable (or a PS that crash-loops that long) costs the run its
  #   admission; "0s" would disable it (pkg/controller/core/core.go:122) and let such a cluster hold
  #   the capacity until its Job gives up, which an unschedulable pod never makes it do.
  cat >"$dir/kueue.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "127.0.0.1:$2"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $1, certDir: $dir/certs}
internalCertManagement: {enable: false}
integrations: {frameworks: ["jobset.x-k8s.io/jobset"]}
fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}
waitForPodsReady: {timeout: 10m, recoveryTimeout: 20m}
EOF
  cat >"$dir/jobset.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "127.0.0.1:$4"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $3, certDir: $dir/certs}
internalCertManagement: {enable: false}
EOF
}

# webhooks MANIFEST PORT PREFIX: the upstream webhook configurations, named with kustomize's prefix,
# each `service:` a URL on loopback with the cluster's CA, without the Pod/Job/... hooks; as JSON.
webhooks() {
  kubectl create --dry-run=client -o json -f "$1" |
    python3 -c '
import base64, json, sys
port, prefix, ca_file = sys.argv[1:]
ca = base64.b64encode(open(ca_file, "rb").read()).decode()
text, documents, at = sys.stdin.read(), [], 0
while text[at:].strip():  # kubectl prints one JSON document per object, one after another
    doc, at = json.JSONDecoder().raw_decode(text, len(text) - len(text[at:].lstrip()))
    documents.append(doc)
for doc in documents:
    doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
    kept = []
    for hook in doc.get("webhooks", []):
        kinds = {r for rule in hook.get("rules", []) for r in rule.get("resources", [])}
        if kinds & {"pods", "jobs", "deployments", "statefulsets"}:
            continue
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
        kept.append(hook)
    doc["webhooks"] = kept
json.dump({"apiVersion": "v1", "kind": "List", "items": documents}, sys.stdout)
' "$2" "$3" "$pki/ca.crt"
}

# Until every CRD of Kueue and JobSet is Established. `kubectl wait` fails at once, instead of
# waiting, on a CRD the API server has not given any condition yet (".status.conditions accessor
# error: <nil>"), which a just-applied CRD can be: so it is asked again.
established() {
  for _ in $(seq 60); do
    if kubectl wait --for=condition=Established --timeout=5s \
      -f "$kueue_src/config/components/crd/bases/" -f "$jobset_src/config/components/crd/bases/" >/dev/null 2>&1; then
      return
    fi
    sleep 0.5
  done
  echo "queueing: Kueue's and JobSet's CRDs not established in time" >&2
  exit 1
}

# The controller manager's garbage collector watches only the kinds it discovered when it started,
# and rediscovers every 30 s (k8s cmd/kube-controller-manager/app/core.go:673-678, a fixed period):
# the JobSet CRD, installed after the cluster came up, made a deleted JobSet's Jobs and pods
# outlive it by about 40 s. kwokctl has no command to restart one component, but `kwokctl start
# cluster` starts only the components that are not running (sigs.k8s.io/kwok
# pkg/kwokctl/runtime/binary/cluster_operation.go:38, startComponent): so stop the controller manager
# by the pid kwokctl keeps for it, and have kwokctl start it again, with its own arguments.
restart_controller_manager() {
  local pidfile=$cluster_dir/pids/kube-controller-manager.pid pid
  pid=$(cat "$pidfile")
  if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kube-controller-manager.*$cluster_dir"; then
    echo "queueing: $pidfile: pid $pid is not this cluster's kube-controller-manager" >&2
    exit 1
  fi
  # Under hack/cluster.sh's creation lock, until its port listens again: while it is down, its port
  # looks free to a cluster being created at the same time (the tests' parallel workers).
  mkdir -p "$cache/locks"
  (
    flock 9
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kwokctl start cluster --name "$name" 9>&- >&2
    local port
    port=$(sed -nE 's/^ *kubeControllerManagerPort: ([0-9]+)$/\1/p' "$cluster_dir/kwok.yaml")
    for _ in $(seq 150); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && exit 0; sleep 0.2; done
    echo "queueing: the controller manager of $name does not listen on $port again" >&2
    exit 1
  ) 9>"$cache/locks/kwokctl-create.lock"
}

# ours PROCESS: the pid of this cluster's PROCESS if it runs (its pid file, and a command line
# naming this cluster's config: a pid the system gave to another process since is not ours).
ours() {
  local pid
  pid=$(cat "$dir/$1.pid" 2>/dev/null) || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config $dir/$1.yaml" || return 1
  echo "$pid"
}

# launch PROCESS ARGS...: PROCESS in the background, its log and pid file beside its config.
launch() {
  local process=$1
  shift
  nohup "$bin/$process" --kubeconfig "$kubeconfig" --config "$dir/$process.yaml" "$@" \
    </dev/null >"$dir/$process.log" 2>&1 &
  echo $! >"$dir/$process.pid"
}

health_port() { sed -nE 's/^health: \{healthProbeBindAddress: "127\.0\.0\.1:([0-9]+)"\}$/\1/p' "$dir/$1.yaml"; }

ready() {
  local process
  for process in "${PROCESSES[@]}"; do
    ours "$process" >/dev/null && curl -sf "http://127.0.0.1:$(health_port "$process")/readyz" >/dev/null || return 1
  done
}

start() {
  [ -f "$kubeconfig" ] || { echo "queueing: no cluster $name (hack/cluster.sh start)" >&2; exit 1; }
  if ready; then log "kueue and jobset already running for $name"; return; fi
  stop_processes
  "$here/tools.sh" kueue >&2
  "$here/tools.sh" jobset >&2
  local modules
  modules=$(go env GOMODCACHE)
  kueue_src=$modules/sigs.k8s.io/kueue@$KUEUE_VERSION
  jobset_src=$modules/sigs.k8s.io/jobset@$JOBSET_VERSION
  [ -d "$kueue_src" ] || (cd /tmp && go mod download "sigs.k8s.io/kueue@$KUEUE_VERSION")
  [ -d "$jobset_src" ] || (cd /tmp && go mod download "sigs.k8s.io/jobset@$JOBSET_VERSION")
  mkdir -p "$dir"
  local ports
  mapfile -t ports < <(free_ports 4)
  certs
  configs "${ports[@]}"
  local started=$SECONDS
  kubectl create namespace kueue-system --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
  kubectl apply --server-side -f "$kueue_src/config/components/crd/bases/" >/dev/null
  kubectl apply --server-side -f "$jobset_src/config/components/crd/bases/" >/dev/null
  established
  {
    webhooks "$kueue_src/config/components/webhook/manifests.yaml" "${ports[0]}" kueue-
    webhooks "$jobset_src/config/components/webhook/manifests.yaml" "${ports[2]}" jobset-
  } >"$dir/webhooks.json"
  kubectl apply --server-side -f "$dir/webhooks.json" >/dev/null
  restart_controller_manager
  log "starting jobset (webhook :${ports[2]}) and kueue (webhook :${ports[0]})"
  launch jobset --leader-elect=false
  # The visibility API server is off: it would read its certificate from a fixed /visibility path
  # and serve on a fixed port (facts-from-source.md §2).
  POD_NAMESPACE=kueue-system launch kueue --feature-gates=VisibilityOnDemand=false
  for _ in $(seq 120); do
    if ready; then
      log "kueue and jobset ready for $name ($((SECONDS - started)) s; logs in $dir)"
      return
    fi
    sleep 0.5
  done
  echo "queueing: not ready in 60 s; see $dir/kueue.log and $dir/jobset.log" >&2
  exit 1
}

stop_processes() {
  local process pid
  for process in "${PROCESSES[@]}"; do
    if pid=$(ours "$process"); then
      kill "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$dir/$process.pid"
  done
}

stop() {
  [ -d "$dir" ] || return 0
  stop_processes
  log "kueue and jobset of $name stopped"
}

status() {
  local process pid code=0
  for process in "${PROCESSES[@]}"; do
    if pid=$(ours "$process"); then
      if curl -sf "http://127.0.0.1:$(health_port "$process")/readyz" >/dev/null; then
        echo "$process: ready (pid $pid, log $dir/$process.log)"
      else
        echo "$process: not ready (pid $pid, log $dir/$process.log)"
        code=1
      fi
    else
      echo "$process: not running"
      code=1
    fi
  done
  return $code
}

case ${1:-status} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
