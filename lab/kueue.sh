#!/usr/bin/env bash
# Kueue and JobSet on this machine beside a local kwok cluster (issue 38, exploration: not yet used
# by make up or the tests). Both run as host processes, as kwokctl's binary runtime runs the control
# plane; the API server reaches their webhooks at https://127.0.0.1:<port>/<path>, served with a
# certificate the cluster's CA signs for 127.0.0.1 (their internal cert managers wait for a kubelet
# to mount a Secret and sign for a Service's DNS name only: docs to come, facts in the issue note).
#
# Usage: TFK8S_CLUSTER_NAME=<name> lab/kueue.sh start|stop|smoke
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.sh
source "$here/../hack/versions.sh"
cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}
name=${TFK8S_CLUSTER_NAME:-tfk8s}
kubeconfig=$cache/kwok/$name.kubeconfig
pki=$cache/kwok/clusters/$name/pki
dir=$cache/kueue/$name
modules=$(go env GOMODCACHE)
kueue_src=$modules/sigs.k8s.io/kueue@$KUEUE_VERSION
jobset_src=$modules/sigs.k8s.io/jobset@$JOBSET_VERSION
KUEUE_WEBHOOK_PORT=19443 JOBSET_WEBHOOK_PORT=19444
# Kueue loads its metrics certificate from this fixed path even with metrics off (cmd/kueue/main.go).
KUEUE_METRICS_CERTS=/etc/kueue/metrics/certs

log() { printf '[kueue %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
kubectl() { command kubectl --kubeconfig "$kubeconfig" "$@"; }

certs() {
  mkdir -p "$dir/certs"
  [ -f "$dir/certs/tls.crt" ] && return
  openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/certs/tls.key" -subj "/CN=127.0.0.1" -out "$dir/certs/tls.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >"$dir/certs/ext"
  openssl x509 -req -in "$dir/certs/tls.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
    -extfile "$dir/certs/ext" -out "$dir/certs/tls.crt" 2>/dev/null
  mkdir -p "$KUEUE_METRICS_CERTS"
  cp "$dir/certs/tls.crt" "$dir/certs/tls.key" "$KUEUE_METRICS_CERTS/"
}

configs() {
  cat >"$dir/kueue.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "127.0.0.1:18081"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $KUEUE_WEBHOOK_PORT, certDir: $dir/certs}
internalCertManagement: {enable: false}
integrations: {frameworks: ["jobset.x-k8s.io/jobset"]}
waitForPodsReady: {timeout: 5m, recoveryTimeout: 0s}
EOF
  cat >"$dir/jobset.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "127.0.0.1:18082"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $JOBSET_WEBHOOK_PORT, certDir: $dir/certs}
internalCertManagement: {enable: false}
EOF
}

# The upstream webhook manifests with every `service:` turned into a URL on loopback, signed by the CA.
webhooks() {
  "$here/../.venv/bin/python" - "$kueue_src/config/components/webhook/manifests.yaml" "$KUEUE_WEBHOOK_PORT" kueue- \
    "$jobset_src/config/components/webhook/manifests.yaml" "$JOBSET_WEBHOOK_PORT" jobset- "$pki/ca.crt" <<'EOF' >"$dir/webhooks.yaml"
import base64, sys, yaml
ca = base64.b64encode(open(sys.argv[7], "rb").read()).decode()
out = []
for manifest, port, prefix in ((sys.argv[1], sys.argv[2], sys.argv[3]), (sys.argv[4], sys.argv[5], sys.argv[6])):
    for doc in yaml.safe_load_all(open(manifest)):
        if not doc:
            continue
        doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
        kept = []
        for hook in doc.get("webhooks", []):
            # Only what training clusters need: JobSets and Kueue's own kinds; never every Pod or Job.
            kinds = {r for rule in hook.get("rules", []) for r in rule.get("resources", [])}
            if kinds & {"pods", "jobs", "deployments", "statefulsets"} - {"jobsets"}:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
            kept.append(hook)
        doc["webhooks"] = kept
        out.append(doc)
print(yaml.safe_dump_all(out))
EOF
}

start() {
  [ -f "$kubeconfig" ] || { echo "kueue: no cluster $name (hack/cluster.sh start)" >&2; exit 1; }
  mkdir -p "$dir"
  "$here/../hack/tools.sh" kueue >&2
  "$here/../hack/tools.sh" jobset >&2
  certs
  configs
  kubectl create namespace kueue-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create namespace jobset-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply --server-side -f "$kueue_src/config/components/crd/bases/" >/dev/null
  kubectl apply --server-side -f "$jobset_src/config/components/crd/bases/" >/dev/null
  webhooks
  kubectl apply --server-side -f "$dir/webhooks.yaml" >/dev/null
  log "jobset"
  nohup "$cache/bin/jobset" --kubeconfig "$kubeconfig" --config "$dir/jobset.yaml" --leader-elect=false \
    >"$dir/jobset.log" 2>&1 &
  echo $! >"$dir/jobset.pid"
  log "kueue"
  POD_NAMESPACE=kueue-system nohup "$cache/bin/kueue" --kubeconfig "$kubeconfig" --config "$dir/kueue.yaml" \
    --feature-gates=VisibilityOnDemand=false >"$dir/kueue.log" 2>&1 &
  echo $! >"$dir/kueue.pid"
  for _ in $(seq 60); do
    if curl -sf http://127.0.0.1:18081/readyz >/dev/null && curl -sf http://127.0.0.1:18082/readyz >/dev/null; then
      log "ready"
      return
    fi
    sleep 1
  done
  echo "kueue: not ready in 60 s; see $dir/kueue.log and $dir/jobset.log" >&2
  exit 1
}

stop() {
  for process in kueue jobset; do
    [ -f "$dir/$process.pid" ] && kill "$(cat "$dir/$process.pid")" 2>/dev/null || true
    rm -f "$dir/$process.pid"
  done
}

# Two 3-CPU JobSets (1 PS, 2 workers) into a 4-CPU queue: the first admitted whole, the second
# suspended with its reason until the first is gone.
smoke() {
  kubectl apply --server-side -f "$here/kueue/smoke-queue.yaml" >/dev/null
  for js in first second; do
    sed "s/NAME/$js/" "$here/kueue/smoke-jobset.yaml" | kubectl apply --server-side -f - >/dev/null
    sleep 3
  done
  kubectl get workloads -n kueue-smoke -o custom-columns='NAME:.metadata.name,RESERVED:.status.conditions[?(@.type=="QuotaReserved")].status,WHY:.status.conditions[?(@.type=="QuotaReserved")].message,ADMITTED:.status.conditions[?(@.type=="Admitted")].status'
  kubectl get jobsets -n kueue-smoke -o custom-columns='NAME:.metadata.name,SUSPENDED:.spec.suspend,DONE:.status.terminalState'
  kubectl get pods -n kueue-smoke -o wide
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  smoke) smoke ;;
  *) echo "usage: $0 start|stop|smoke" >&2; exit 2 ;;
esac
