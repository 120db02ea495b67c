#!/usr/bin/env bash
# The local Kubernetes API for tfk8s: a real control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) whose nodes and pods are simulated by kwok.
#
# Usage: hack/cluster.sh start [--kube 1.34|1.25] [--real-node] [--queueing] | stop | status | kubeconfig
#        hack/cluster.sh user-kubeconfig <user> [<group>...]
#
# --queueing adds Kueue and JobSet, as host processes of the cluster (hack/queueing.sh; built by
# hack/tools.sh kueue and jobset on first use): what a platform with `queueing.enabled` needs.
# Kubernetes 1.34 only (Kueue needs 1.29 or newer). `stop` stops them, `status` reports them.
#
# --real-node adds, beside the simulated nodes, a real one with a container runtime, a kubelet,
# kube-proxy, cluster DNS and a NetworkPolicy firewall (lab/realnode.sh; root and a few Debian
# packages; `stop` stops it), and gives the cluster Kubernetes' own node timings (below).
#
# --kube picks the control plane: 1.34 (the default, $KUBE_VERSION) or 1.25 ($KUBE_LEGACY_VERSION,
# the last with the in-tree GlusterFS provisioner; hack/tools.sh kube-legacy builds it). Name the
# clusters apart with TFK8S_CLUSTER_NAME.
#
# user-kubeconfig mints a client certificate for one user (CN=<user>, one O=<group> per group),
# signed by the running cluster's CA, and prints the path of a kubeconfig that authenticates as that
# user ($KWOK_WORKDIR/<name>.user-<user>.kubeconfig, mode 0600, the key embedded; valid 7 days, a
# re-run replaces it). The API server authorizes with RBAC, so such a user may do nothing until a
# binding says so: how tenants are tested without a second cluster or an identity provider.
#
# status prints the nodes, or fails naming each component whose port is closed (the scheduler, the
# controller manager, kwok: a cluster without them still answers /readyz), with the end of its log.
# Without an API server to answer, it says the cluster is not running.
#
# It only ever touches its own cluster: state under $TFK8S_CACHE/kwok, its own kubeconfig file
# ($TFK8S_CACHE/kwok/<name>.kubeconfig), never ~/.kube/config.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.sh
source "$here/versions.sh"
cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}
bin=$cache/bin
name=${TFK8S_CLUSTER_NAME:-tfk8s}
export KWOK_WORKDIR=$cache/kwok
kubeconfig=$KWOK_WORKDIR/$name.kubeconfig
stages=$KWOK_WORKDIR/$name.stages.yaml
export PATH=$bin:$PATH

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
kubectl() { command "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

running() {
  [ -f "$kubeconfig" ] && kubectl get --raw /readyz >/dev/null 2>&1
}

# Stages: kwok's own node stages and fast pod stages, minus pod-complete (a training pod runs
# until it is done, which a simulated pod never is), plus ours: deleted pods terminate as under a
# kubelet, and workers of a known-bad image fail.
write_stages() {
  local stage_dir
  stage_dir=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
  [ -d "$stage_dir" ] || (cd /tmp && go mod download "sigs.k8s.io/kwok@$KWOK_VERSION")
  mkdir -p "$KWOK_WORKDIR"
  : >"$stages"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
    cat "$stage_dir/$f" >>"$stages"
    printf '\n---\n' >>"$stages"
  done
  cat "$here/kwok/pod-terminate-stage.yaml" >>"$stages"
  printf '\n---\n' >>"$stages"
  cat "$here/kwok/failing-worker-stage.yaml" >>"$stages"
  printf '\n---\n' >>"$stages"
  # The components' own flags. (Not `kwokctl --extra-args`: v0.8.0 indexes its patches by flag
  # position and panics when one component has several flags after another's.)
  # - The API server's default Service range is a /24 (254 ClusterIPs): fewer than a platform of
  #   100 users needs (3 Services each). A /16, as kubeadm-sized clusters have.
  # - It reaches a real node's kubelet (lab/realnode.sh) at its address, for `kubectl logs`, with
  #   the cluster's admin certificate.
  # - kwok simulates only the nodes annotated as fake (hack/kwok/nodes.yaml), never a real kubelet.
  # - The scheduler and the controller manager run without leader election: each is the only one of
  #   its kind, and with it a stall of the API server longer than the lease's renew deadline (10 s)
  #   makes it exit for good (kwokctl restarts nothing). CI on 2026-11-25 lost its e2e cluster's
  #   scheduler that way ("Leaderelection lost"), and every later pod stayed Pending.
  local pki=$KWOK_WORKDIR/clusters/$name/pki
  cat >>"$stages" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  # The kubernetes Service's ClusterIP, which in-cluster clients (KUBERNETES_SERVICE_HOST, a PS
  # retiring itself on a real node) dial and verify the serving certificate against.
  kubeApiserverCertSANs: ["10.96.0.1"]
componentsPatches:
- name: kube-apiserver
  extraArgs:
  - {key: service-cluster-ip-range, value: 10.96.0.0/16}
  - {key: kubelet-preferred-address-types, value: "InternalIP,Hostname"}
  - {key: kubelet-client-certificate, value: $pki/admin.crt}
  - {key: kubelet-client-key, value: $pki/admin.key}
- name: kube-scheduler
  extraArgs:
  - {key: leader-elect, value: "false"}
- name: kube-controller-manager
  extraArgs:
  - {key: leader-elect, value: "false"}
- name: kwok-controller
  extraArgs:
  - {key: manage-all-nodes, value: "false"}
  - {key: manage-nodes-with-annotation-selector, value: kwok.x-k8s.io/node=fake}
EOF
}

# COMPONENT_PORTS: how many ports kwokctl gives a cluster's components (etcd two, the others one each).
COMPONENT_PORTS=6

# component_ports: "<component> <port>" for each port kwokctl gave this cluster's components.
component_ports() {
  sed -nE 's/^ *(etcdPeerPort|etcdPort|kubeApiserverPort|kubeControllerManagerPort|kubeSchedulerPort|kwokControllerPort): ([0-9]+)$/\1 \2/p' \
    "$KWOK_WORKDIR/clusters/$name/kwok.yaml" | sed -E 's/^etcd(Peer)?Port /etcd /; s/^kubeApiserverPort /kube-apiserver /;
      s/^kubeControllerManagerPort /kube-controller-manager /; s/^kubeSchedulerPort /kube-scheduler /;
      s/^kwokControllerPort /kwok-controller /'
}

# component_state <component> <port>: "listening", "exited" (its process gone, or a zombie nobody
# reaped) or "starting".
component_state() {
  local pid
  if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then echo listening; return; fi
  pid=$(cat "$KWOK_WORKDIR/clusters/$name/pids/$1.pid" 2>/dev/null || true)
  # /proc/PID/stat's third field is the state; past the command's parentheses, which may hold spaces.
  if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] && [ "$(sed -E 's/.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat")" != Z ]; then
    echo starting
  else
    echo exited
  fi
}

# report_component <component> <port> <what>: says what became of it, and its log's last lines.
report_component() {
  log "$1 of cluster $name $3 (port $2); its log ends:"
  tail -n 15 "$KWOK_WORKDIR/clusters/$name/logs/$1.log" >&2 || true
}

# report_closed_ports: every component whose port is closed, with its log; fails if there is one.
# (`status`, and a creation that failed, before the cluster and its logs are deleted.)
report_closed_ports() {
  local component port state closed=0
  [ -f "$KWOK_WORKDIR/clusters/$name/kwok.yaml" ] || { log "kwokctl left no kwok.yaml for $name"; return 1; }
  while read -r component port; do
    state=$(component_state "$component" "$port")
    if [ "$state" != listening ]; then
      report_component "$component" "$port" "is $state, not listening"
      closed=1
    fi
  done < <(component_ports)
  return $closed
}

# wait_for_ports: until every port kwokctl gave this cluster's components accepts connections: only
# then may the next creation look for free ports. A component whose process is gone, or whose port
# is still closed after 90 s (the 2-core CI at full load once took longer than 30 s), fails the wait
# with its name and its log's last lines: CI on 2026-11-30 lost a 1.25 cluster with only "port
# 32738 does not listen" to go on.
wait_for_ports() {
  local component port state seen=0 deadline=$((SECONDS + 90))
  [ -f "$KWOK_WORKDIR/clusters/$name/kwok.yaml" ] || { log "kwokctl left no kwok.yaml for $name"; return 1; }
  while read -r component port; do
    seen=$((seen + 1))
    while state=$(component_state "$component" "$port") && [ "$state" != listening ]; do
      if [ "$state" = exited ]; then report_component "$component" "$port" "exited before it listened"; return 1; fi
      if [ $SECONDS -ge $deadline ]; then report_component "$component" "$port" "does not listen after 90 s"; return 1; fi
      sleep 0.2
    done
  done < <(component_ports)
  # kwok.yaml in another shape (a new kwokctl) would leave nothing to wait for: say so, not pass.
  [ $seen = $COMPONENT_PORTS ] || { log "found $seen of $COMPONENT_PORTS component ports in $name's kwok.yaml"; return 1; }
}

# create_once VERSION: one kwokctl creation, until its components listen; on failure, every
# component whose port is closed is named with its log. Its caller tests its status, which turns
# `set -e` off inside it: every failure returns explicitly.
create_once() {
  local kube_bin=$cache/tools/kubernetes-$1
  # With a real node, Kubernetes' own node timings (a node's lease of 40 s, the controller
  # manager's --node-monitor-grace-period of 40 s), not kwokctl's five times those for simulated
  # nodes: a real kubelet that stops answering makes its node NotReady, and its pods evicted, as
  # on any cluster, not after 3m20s.
  if ! KWOK_KUBE_VERSION=v$1 kwokctl create cluster --name "$name" --runtime binary \
    ${real_node:+--heartbeat-factor 1} --config "$stages" --kubeconfig "$kubeconfig" \
    --kube-apiserver-binary "$kube_bin/kube-apiserver" \
    --kube-controller-manager-binary "$kube_bin/kube-controller-manager" \
    --kube-scheduler-binary "$kube_bin/kube-scheduler" \
    --kwok-controller-binary "$bin/kwok" \
    --etcd-binary "$bin/etcd" \
    --wait 2m 9>&- >&2; then
    report_closed_ports || true
    return 1
  fi
  wait_for_ports
}

start() {
  local want=${1:-${KUBE_VERSION%.*}} version
  case $want in
    "${KUBE_VERSION%.*}") version=$KUBE_VERSION ;;
    "${KUBE_LEGACY_VERSION%.*}") version=$KUBE_LEGACY_VERSION ;;
    *) echo "--kube $want: choose ${KUBE_VERSION%.*} or ${KUBE_LEGACY_VERSION%.*}" >&2; exit 2 ;;
  esac
  if running; then
    local serving
    serving=$(kubectl version -o json 2>/dev/null | sed -nE 's/.*"gitVersion": *"v([0-9.]+)".*/\1/p' | tail -1)
    if [ "$serving" = "$version" ]; then log "cluster $name already running ($kubeconfig)"; return; fi
    log "cluster $name runs Kubernetes $serving, not $version: recreating it"
    stop
  fi
  if [ -d "$KWOK_WORKDIR/clusters/$name" ]; then
    # Left over from a session or machine that ended without `stop`: its processes are gone (or
    # half gone) and kwokctl cannot revive it. A simulated cluster holds nothing worth keeping.
    log "found a dead cluster $name: deleting it first"
    stop
  fi
  "$here/tools.sh" main >&2
  [ "$version" = "$KUBE_VERSION" ] || "$here/tools.sh" kube-legacy >&2
  write_stages
  log "creating kwok cluster $name (Kubernetes $version, binary runtime)"
  # One creation at a time on this machine: kwokctl gives each component the first port down from
  # 32767 that nothing listens on yet, so two clusters created at once (the tests' parallel
  # workers) get the same ports and one cluster's components cannot bind them. Held until the
  # cluster is up (--wait), when its ports are taken. kwokctl runs without the lock's descriptor:
  # the components it leaves running would hold the lock for the cluster's life.
  mkdir -p "$cache/locks"
  (
    flock 9
    # A simulated cluster holds nothing yet: one whose component never listened is deleted and
    # created once more (on new ports, if another process took the first ones), said in the log.
    create_once "$version" || {
      log "cluster $name did not come up: deleting it and creating it once more"
      kwokctl delete cluster --name "$name" --kubeconfig "$kubeconfig" 9>&- >&2 || true
      create_once "$version"
    }
  ) 9>"$cache/locks/kwokctl-create.lock"
  kubectl apply -f "$here/kwok/nodes.yaml" >&2
  kubectl wait --for=condition=Ready node --all --timeout=120s >&2
  log "ready: export KUBECONFIG=$kubeconfig"
}

stop() {
  if [ -d "$cache/realnode/$name" ]; then "$here/../lab/realnode.sh" stop; fi
  "$here/queueing.sh" stop
  if [ -d "$KWOK_WORKDIR/clusters/$name" ]; then
    kwokctl delete cluster --name "$name" --kubeconfig "$kubeconfig" >&2 || true
  fi
  # Users' credentials too: their CA went with the cluster.
  rm -f "$kubeconfig" "$KWOK_WORKDIR/$name".user-*.kubeconfig
  log "cluster $name stopped"
}

# status: the nodes, or which of the control plane's components is down (a cluster whose scheduler
# exited still answers /readyz, and every new pod stays Pending).
status() {
  if running; then
    report_closed_ports || { echo "cluster $name is running without all of its components: hack/cluster.sh stop, then start"; return 1; }
    kubectl get nodes -o wide
    if [ -d "$KWOK_WORKDIR/clusters/$name/queueing" ]; then "$here/queueing.sh" status; fi
  else
    echo "cluster $name is not running"
    return 1
  fi
}

# A user's kubeconfig: the admin kubeconfig's server and CA, a client certificate of the user's
# identity signed by the cluster's CA. The key is embedded and never leaves $KWOK_WORKDIR (not the
# repository); everything is written 0600.
user_kubeconfig() {
  local user=${1:?user-kubeconfig needs a user name} pki=$KWOK_WORKDIR/clusters/$name/pki subject=""
  shift
  running || { echo "cluster $name is not running: hack/cluster.sh start" >&2; exit 1; }
  [ -f "$pki/ca.key" ] || { echo "no CA key at $pki/ca.key: cannot mint credentials for $name" >&2; exit 1; }
  # '/' and '=' would break the openssl subject; system: names are the API server's own identities
  # (system:masters is cluster-admin): a tenant's credentials are never those.
  for part in "$user" "$@"; do
    case $part in "" | */* | *=* | system:*) echo "user-kubeconfig: ${part:-(empty)}: not a tenant user or group name" >&2; exit 2 ;; esac
  done
  subject="/CN=$user"
  for group in "$@"; do subject="$subject/O=$group"; done
  local out=$KWOK_WORKDIR/$name.user-$user.kubeconfig scratch server
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  scratch=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: `scratch` is local
  trap "rm -rf '$scratch'" EXIT
  (
    umask 077
    export KUBECONFIG=$scratch/kubeconfig
    openssl req -new -newkey rsa:2048 -nodes -keyout "$scratch/key.pem" -subj "$subject" -out "$scratch/req.csr" 2>/dev/null
    openssl x509 -req -in "$scratch/req.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
      -CAcreateserial -CAserial "$scratch/ca.srl" -days 7 -out "$scratch/cert.pem" 2>/dev/null
    command "$bin/kubectl" config set-cluster "$name" --server "$server" --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
    command "$bin/kubectl" config set-credentials "$user" \
      --client-certificate "$scratch/cert.pem" --client-key "$scratch/key.pem" --embed-certs >/dev/null
    command "$bin/kubectl" config set-context "$user@$name" --cluster "$name" --user "$user" >/dev/null
    command "$bin/kubectl" config use-context "$user@$name" >/dev/null
    # Renamed into place: a reader never sees half a file, and a re-run replaces the old one.
    mv -f "$scratch/kubeconfig" "$out"
  )
  echo "$out"
}

case ${1:-status} in
  start)
    shift
    kube="" real_node="" queueing=""
    while [ $# -gt 0 ]; do
      case $1 in
        --kube) kube=${2:?--kube needs a version}; shift 2 ;;
        --real-node) real_node=1; shift ;;
        --queueing) queueing=1; shift ;;
        *) echo "start: unknown option $1" >&2; exit 2 ;;
      esac
    done
    if [ -n "$queueing" ] && [ "${kube:-${KUBE_VERSION%.*}}" != "${KUBE_VERSION%.*}" ]; then
      # Kueue's README.md:60 (v0.17.0): "Requires Kubernetes 1.29 or newer".
      echo "start: --queueing needs --kube ${KUBE_VERSION%.*} (Kueue $KUEUE_VERSION needs Kubernetes 1.29 or newer)" >&2
      exit 2
    fi
    start ${kube:+"$kube"}
    if [ -n "$real_node" ]; then "$here/../lab/realnode.sh" start; fi
    if [ -n "$queueing" ]; then "$here/queueing.sh" start; fi ;;
  stop) stop ;;
  status) status ;;
  kubeconfig) echo "$kubeconfig" ;;
  user-kubeconfig) shift; user_kubeconfig "$@" ;;
  *) echo "usage: $0 start|stop|status|kubeconfig|user-kubeconfig <user> [<group>...]" >&2; exit 2 ;;
esac
