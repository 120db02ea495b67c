#!/usr/bin/env bash
# A real node beside a local cluster's simulated ones: containerd + runc with a CNI bridge, a
# kubelet that registers as a node of the kwok control plane, kube-proxy (iptables), CoreDNS and
# kube-router's NetworkPolicy firewall, as processes of that cluster, stopped with it
# (hack/cluster.sh start --real-node | stop).
#
# Usage: lab/realnode.sh check | install | start | stop | status | import <image> | firewall-off
#        | kill-container <id> | kubelet-stop | kubelet-start
#
#   check    says whether this machine can run one, and if not why (root, cgroups, packages)
#   install  the Debian packages it needs (containerd, runc, CNI plugins, iptables, ipset, debootstrap)
#   import   builds (lab/images.py) and imports an image into the node's containerd
#   firewall-off  stops kube-router and removes its rules: a CNI that ignores NetworkPolicies (tests of `tfk8s doctor`)
#   kill-container  SIGKILL to a container's processes (its id from the pod's status, without
#            containerd://): the container dies in place, and the kubelet restarts it in its pod
#   kubelet-stop / kubelet-start  the kubelet alone, its containers left running: a node that stops
#            answering, and comes back
#
# The node is named tfk8s-real-<cluster>, labelled tfk8s.io/real-node=true and tainted
# tfk8s.io/real-node=true:NoSchedule: only what asks for it lands there (an experiment's `ps` and
# `workers` nodeSelector and tolerations), and kwok leaves it alone
# (the cluster's kwok controller manages only nodes annotated kwok.x-k8s.io/node=fake). One real
# node per machine at a time (it owns the bridge, the pod range and the kubelet's ports). Its
# state lives under $TFK8S_CACHE/realnode/<cluster>, containerd's images in the machine's store
# ($TFK8S_CACHE/realnode/store), which the next cluster's node starts with; pods reach the cluster's DNS at the bridge's
# address and the API server through the `kubernetes` Service. Pods on it are held to the
# cluster's NetworkPolicies (kube-router); the DNS server is no pod, so a platform whose tenants
# run there allows it by address (platform.network.dns.cidrs: [10.88.0.1/32]).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.sh
source "$here/../hack/versions.sh"
cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}
bin=$cache/bin
name=${TFK8S_CLUSTER_NAME:-tfk8s}
kubeconfig=$cache/kwok/$name.kubeconfig
pki=$cache/kwok/clusters/$name/pki
dir=$cache/realnode/$name
active=$cache/realnode/active
# containerd's images and their unpacked layers, kept from one cluster's node to the next (one node
# per machine at a time): an image is imported once per machine, not once per cluster (the
# tensorflow and jupyter images took 37 and 40 s each time). Its containers go with the node
# (stop_processes), its images stay.
store=$cache/realnode/store
node=tfk8s-real-$name
bridge=tfk8s0
pod_cidr=10.88.0.0/16
gateway=10.88.0.1
packages=(containerd runc containernetworking-plugins iptables ipset debootstrap)
export PATH=$bin:/usr/sbin:/sbin:$PATH

log() { printf '[realnode %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
kubectl() { command "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# check: why this machine cannot run a real node, or nothing.
why_not() {
  [ "$(id -u)" = 0 ] || { echo "not root: containerd, runc and the kubelet need root"; return; }
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || { echo "no cgroups mounted at /sys/fs/cgroup"; return; }
  grep -qw overlay /proc/filesystems || { echo "the kernel has no overlay filesystem (containerd's snapshotter)"; return; }
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v ipset >/dev/null || missing+=(ipset)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  if [ ${#missing[@]} -gt 0 ]; then echo "missing Debian packages: ${missing[*]} (lab/realnode.sh install)"; fi
}

install() {
  [ "$(id -u)" = 0 ] || { echo "realnode: install needs root" >&2; exit 1; }
  if [ -z "$(why_not)" ]; then return; fi
  log "installing ${packages[*]}"
  # Without the install lock's descriptor (`main`): a package's scripts may leave a daemon running.
  apt-get update -qq 9>&- >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" 9>&- >&2
}

# pid_alive FILE: the process whose pid FILE holds is running.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# run NAME COMMAND...: COMMAND in the background, its pid in $dir/NAME.pid, its log in $dir/NAME.log.
run() {
  local what=$1
  shift
  nohup "$@" >"$dir/$what.log" 2>&1 &
  echo $! >"$dir/$what.pid"
}

# wait_for WHAT SECONDS COMMAND...: poll COMMAND until it succeeds.
wait_for() {
  local what=$1 seconds=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -ge "$seconds" ]; then
      log "$what did not come up in $seconds s; its log:"
      tail -20 "$dir/${what%% *}.log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

# A client certificate signed by the cluster's CA, as a kubeconfig: the node's own identity
# (system:node:<node> in system:nodes, what the API server's Node authorizer expects of a kubelet).
node_kubeconfig() {
  local out=$dir/kubelet.kubeconfig server
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  (
    umask 077
    openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/node.key" -subj "/CN=system:node:$node/O=system:nodes" \
      -out "$dir/node.csr" 2>/dev/null
    openssl x509 -req -in "$dir/node.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -CAserial "$dir/ca.srl" -days 7 -out "$dir/node.crt" 2>/dev/null
    KUBECONFIG=$out command "$bin/kubectl" config set-cluster local --server "$server" --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
    KUBECONFIG=$out command "$bin/kubectl" config set-credentials node --client-certificate "$dir/node.crt" \
      --client-key "$dir/node.key" --embed-certs >/dev/null
    KUBECONFIG=$out command "$bin/kubectl" config set-context node --cluster local --user node >/dev/null
    KUBECONFIG=$out command "$bin/kubectl" config use-context node >/dev/null
  )
}

ctr() { command ctr --address "$dir/containerd.sock" -n k8s.io "$@"; }

import() {
  local what=${1:?import needs an image name} built archive tag
  built=$("$here/../.venv/bin/python" "$here/images.py" build "$what")
  archive=$(printf '%s' "$built" | sed -nE 's/.*"archive": "([^"]+)".*/\1/p')
  tag=$(printf '%s' "$built" | sed -nE 's/.*"tag": "([^"]+)".*/\1/p')
  if ! ctr images ls -q | grep -qxF "$tag"; then
    ctr images import --snapshotter overlayfs "$archive" >&2
  fi
  echo "$tag"
}

# forget_stale_images: the store's images of lab/images.py that its cache no longer holds (an
# older recipe or older inputs), so that the store keeps one of each, as the cache does.
forget_stale_images() {
  local tag
  for tag in $(ctr images ls -q | grep '^tfk8s\.local/' || true); do
    grep -qxF "$tag" "$cache"/images/*.tag 2>/dev/null || ctr images rm "$tag" >/dev/null
  done
}

# start_kubelet: the node's kubelet with the configuration start() wrote, until the node is Ready.
start_kubelet() {
  run kubelet "$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --hostname-override "$node" --node-ip "$(cat "$dir/node-ip")" \
    --node-labels "tfk8s.io/real-node=true" --v 1
  wait_for kubelet 120 kubectl wait --for=condition=Ready "node/$node" --timeout=2s
}

# stop_kubelet: the kubelet alone, as a node that stops answering: its pods' containers run on
# (containerd keeps them), the node's status goes stale, and the control plane marks it NotReady.
stop_kubelet() {
  pid_alive "$dir/kubelet.pid" || { log "no kubelet running for node $node"; return 1; }
  kill "$(cat "$dir/kubelet.pid")"
  for _ in $(seq 100); do pid_alive "$dir/kubelet.pid" || break; sleep 0.1; done
  log "kubelet of node $node stopped"
}

start() {
  local reason
  reason=$(why_not)
  [ -z "$reason" ] || { echo "realnode: this machine cannot run a real node: $reason" >&2; exit 1; }
  [ -f "$kubeconfig" ] && kubectl get --raw /readyz >/dev/null 2>&1 || { echo "realnode: cluster $name is not running" >&2; exit 1; }
  if [ -f "$active" ] && [ "$(cat "$active")" != "$name" ] && pid_alive "$cache/realnode/$(cat "$active")/kubelet.pid"; then
    echo "realnode: cluster $(cat "$active") already has this machine's real node (lab/realnode.sh stop with TFK8S_CLUSTER_NAME=$(cat "$active"))" >&2
    exit 1
  fi
  if pid_alive "$dir/kubelet.pid"; then log "node $node already running"; return; fi
  stop_processes
  "$here/../hack/tools.sh" node >&2
  mkdir -p "$dir/cni" "$dir/kubelet" "$dir/containerd"
  echo "$name" >"$active"

  local pause
  sed -e "s#@DIR@#$dir#g; s#@STORE@#$store#g" "$here/realnode/containerd.toml.in" >"$dir/containerd.toml.tmp"
  log "containerd"
  # The sandbox image is named in containerd's config: build it first, import it once it runs.
  pause=$("$here/../.venv/bin/python" "$here/images.py" build pause | sed -nE 's/.*"tag": "([^"]+)".*/\1/p')
  sed -e "s#@PAUSE@#$pause#" "$dir/containerd.toml.tmp" >"$dir/containerd.toml" && rm "$dir/containerd.toml.tmp"
  run containerd containerd --config "$dir/containerd.toml"
  wait_for containerd 30 ctr version
  forget_stale_images
  import pause >/dev/null

  # The bridge and its gateway address exist before the first pod, so CoreDNS can listen there.
  # Its addresses are handed out from the node's own directory, which `stop` removes: in the
  # machine-wide default (/var/lib/cni/networks) every stopped node's pods kept theirs (440 of them
  # after two days of test runs, none released: a node stops without deleting its pods' networks).
  sed -e "s#@BRIDGE@#$bridge#; s#@POD_CIDR@#$pod_cidr#; s#@DIR@#$dir#" "$here/realnode/cni.conflist.in" >"$dir/cni/10-tfk8s.conflist"
  ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
  ip addr show dev "$bridge" | grep -qF "$gateway/" || ip addr add "$gateway/${pod_cidr#*/}" dev "$bridge"
  ip link set "$bridge" up
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 2>/dev/null || sysctl -qw net.ipv4.ip_forward=1

  log "CoreDNS on $gateway:53"
  cat >"$dir/Corefile" <<EOF
.:53 {
    bind $gateway
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 5
}
EOF
  run coredns "$bin/coredns" -conf "$dir/Corefile"

  log "kubelet ($node)"
  node_kubeconfig
  local node_ip
  node_ip=$(ip -4 route get 1.1.1.1 | sed -nE 's/.* src ([0-9.]+).*/\1/p')
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 and no systemd here: plain cgroupfs, no QoS hierarchy, no allocatable enforcement.
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
evictionHard: {}
# The node's images are built and imported here (lab/images.py, then this script's import), never
# pulled: the kubelet must never collect them. Its image collection weighs the disk's use against the
# filesystem's size, which on this kind of VM is far above what it can hold (252 GB, of which 92
# usable): after a cold CI's builds it read 88%, past the default 85%, and removed every image no
# container used, the sandbox image among them, so the next pods never started (a cold CI, 2026-11-29).
# 100: only a full disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
containerRuntimeEndpoint: unix://$dir/containerd.sock
clusterDNS: [$gateway]
clusterDomain: cluster.local
podCIDR: $pod_cidr
readOnlyPort: 0
# Who may use the kubelet's API (logs, exec): clients of the cluster's CA (the API server), each
# request authorized by the API server (a SubjectAccessReview), as on any kubeadm node.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
EOF
  printf 'registerWithTaints:\n- {key: tfk8s.io/real-node, value: "true", effect: NoSchedule}\n' >>"$dir/kubelet.yaml"
  echo "$node_ip" >"$dir/node-ip"
  start_kubelet

  log "kube-proxy (iptables)"
  cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $pod_cidr
hostnameOverride: $node
clientConnection: {kubeconfig: $kubeconfig}
# This VM does not let kube-proxy raise the conntrack table: leave it as the kernel set it.
conntrack: {maxPerCore: 0}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
EOF
  run kube-proxy "$bin/kube-proxy" --config "$dir/kube-proxy.yaml"
  wait_for kube-proxy 30 sh -c "iptables -t nat -S KUBE-SERVICES | grep -q default/kubernetes"
  wait_for coredns 30 bash -c "exec 3<>/dev/tcp/$gateway/53"

  log "kube-router (NetworkPolicy firewall only)"
  # Its router (BGP) and service proxy stay off: the bridge and kube-proxy do their jobs. It is
  # Ready once its first full sync has programmed every policy (its health port says so).
  run kube-router "$bin/kube-router" --run-firewall=true --run-router=false --run-service-proxy=false \
    --kubeconfig "$kubeconfig" --hostname-override "$node" --service-cluster-ip-range 10.96.0.0/16 \
    --health-addr 127.0.0.1 --health-port 20244 --enable-ipv6=false --v 1
  wait_for kube-router 60 sh -c "iptables -S KUBE-ROUTER-FORWARD | grep -q . && curl -fsS http://127.0.0.1:20244/healthz"
  log "node $node ready: pods on it tolerate tfk8s.io/real-node and select tfk8s.io/real-node=true"
}

# The rules the node's kubelet and CNI bridge left (kube-proxy cleans its own): the bridge's
# masquerade rules for this network (commented `name: "tfk8s"`) and their chains, the kubelet's
# canaries and its localnet firewall. (No other kubelet runs on a machine with a real node.)
clean_iptables() {
  local rule chain table tool
  { iptables -t nat -S POSTROUTING 2>/dev/null | grep -F 'name: \"tfk8s\"' || true; } | while read -r rule; do
    chain=$(printf '%s' "$rule" | sed -nE 's/.* -j (CNI-[0-9a-f]+)$/\1/p')
    eval "iptables -t nat ${rule/-A /-D }" 2>/dev/null || true
    [ -n "$chain" ] && { iptables -t nat -F "$chain"; iptables -t nat -X "$chain"; } 2>/dev/null || true
  done
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for chain in INPUT OUTPUT; do "$tool" -D "$chain" -j KUBE-FIREWALL 2>/dev/null || true; done
    for table in filter nat mangle; do
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$tool" -t "$table" -F "$chain" 2>/dev/null && "$tool" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

# kube-router's rules and sets (kube-router --cleanup-config would also destroy every other
# ipset of the machine and flush IPVS): its jumps from the built-in chains (commented
# "kube-router netpol"), its chains, then its sets, which only its chains referenced.
clean_kube_router() {
  local rule chain chains set
  for chain in INPUT FORWARD OUTPUT; do
    { iptables -S "$chain" 2>/dev/null | grep -F 'kube-router netpol' || true; } | while read -r rule; do
      eval "iptables ${rule/-A /-D }" 2>/dev/null || true
    done
  done
  chains=$(iptables -S 2>/dev/null | sed -nE 's/^-N (KUBE-ROUTER-[A-Z]+|KUBE-NWPLCY-[A-Z0-9]+|KUBE-POD-FW-[A-Z0-9]+)$/\1/p')
  for chain in $chains; do iptables -F "$chain" 2>/dev/null || true; done
  for chain in $chains; do iptables -X "$chain" 2>/dev/null || true; done
  command -v ipset >/dev/null || return 0
  { ipset list -n 2>/dev/null | grep -E '^(KUBE-(SRC|DST)-[A-Z0-9]+|kube-router-local-pods|TMP-[A-Z0-9]+)$' || true; } |
    while read -r set; do ipset destroy "$set" 2>/dev/null || true; done
}

# The names under /var/run/netns of the network namespaces this node's running tasks are in.
# Never fails (stop runs under `set -e`, and a failure here would leave containerd running).
pod_network_namespaces() {
  local pid inode file
  { ctr tasks ls 2>/dev/null || true; } | awk 'NR > 1 { print $2 }' | while read -r pid; do
    inode=$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null) || continue
    for file in /var/run/netns/*; do
      if [ -e "$file" ] && [ "$(stat -L -c %i "$file" 2>/dev/null || true)" = "$inode" ]; then basename "$file"; fi
    done
  done | sort -u || true
}

# Everything the node started, in reverse order; what its pods left (containers, mounts, rules).
stop_processes() {
  local what netns=""
  if pid_alive "$dir/containerd.pid"; then
    for what in kubelet kube-router kube-proxy coredns; do pid_alive "$dir/$what.pid" && kill "$(cat "$dir/$what.pid")"; done
    sleep 1
    # The pods' network namespaces, found from their tasks' processes before they die: no CNI DEL
    # runs for a sandbox killed here, so each namespace (a bind mount under /var/run/netns) and its
    # veth would outlive the node, one pair per pod per run. Only this node's namespaces go.
    netns=$(pod_network_namespaces || true)
    # The pods' containers and sandboxes: runc processes outlive the kubelet otherwise.
    # (Each listing may fail or find nothing: neither stops the clean-up.)
    { ctr tasks ls -q 2>/dev/null || true; } | while read -r task; do ctr tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true; done
    sleep 1
    { ctr tasks ls -q 2>/dev/null || true; } | while read -r task; do ctr tasks rm -f "$task" >/dev/null 2>&1 || true; done
    { ctr containers ls -q 2>/dev/null || true; } | while read -r c; do ctr containers rm "$c" >/dev/null 2>&1 || true; done
    kill "$(cat "$dir/containerd.pid")" 2>/dev/null || true
    for what in $netns; do ip netns delete "$what" 2>/dev/null || true; done
  fi
  for what in kubelet kube-router kube-proxy coredns containerd; do
    if pid_alive "$dir/$what.pid"; then
      sleep 1
      kill -9 "$(cat "$dir/$what.pid")" 2>/dev/null || true
    fi
    rm -f "$dir/$what.pid"
  done
  [ -x "$bin/kube-proxy" ] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  clean_iptables
  clean_kube_router
  if [ -d "$dir" ]; then
    { grep -F " $dir/" /proc/mounts || true; } | cut -d' ' -f2 | sort -r | while read -r mount; do umount -l "$mount" 2>/dev/null || true; done
  fi
  ip link del "$bridge" 2>/dev/null || true
}

# The node's CNI without NetworkPolicy enforcement, as a cluster whose CNI ignores policies is
# (tests/e2e/test_real_network.py: `tfk8s doctor` must fail there): kube-router stopped, its rules gone.
firewall_off() {
  if pid_alive "$dir/kube-router.pid"; then
    kill "$(cat "$dir/kube-router.pid")"
    local waited=0
    while pid_alive "$dir/kube-router.pid" && [ $waited -lt 20 ]; do sleep 0.5; waited=$((waited + 1)); done
    pid_alive "$dir/kube-router.pid" && kill -9 "$(cat "$dir/kube-router.pid")"
  fi
  rm -f "$dir/kube-router.pid"
  clean_kube_router
  log "kube-router stopped: NetworkPolicies are no longer enforced on $node"
}

stop() {
  stop_processes
  if [ -f "$kubeconfig" ] && kubectl get --raw /readyz >/dev/null 2>&1; then
    kubectl delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  # Images stay, cached by content under $TFK8S_CACHE/images and imported in $store; the node's own state goes.
  rm -rf "$dir"
  if [ -f "$active" ] && [ "$(cat "$active")" = "$name" ]; then rm -f "$active"; fi
  log "node $node stopped"
}

status() {
  if pid_alive "$dir/kubelet.pid"; then
    kubectl get node "$node" -o wide
  else
    echo "no real node for cluster $name"
    return 1
  fi
}

case ${1:-status} in
  check)
    reason=$(why_not)
    if [ -n "$reason" ]; then echo "no real node here: $reason"; exit 1; fi
    echo "this machine can run a real node" ;;
  # Locked: the background build of `make test` (lab/suite.py) and a real-node test may both ask.
  install) mkdir -p "$cache/locks" && (flock 9 && install) 9>"$cache/locks/realnode-install.lock" ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  import) shift; import "$@" ;;
  firewall-off) firewall_off ;;
  kill-container) ctr tasks kill --all -s SIGKILL "${2:?kill-container needs a container id}" ;;
  kubelet-stop) stop_kubelet ;;
  kubelet-start) start_kubelet ;;
  *) echo "usage: $0 check|install|start|stop|status|import <image>|firewall-off|kill-container <id>|kubelet-stop|kubelet-start" >&2; exit 2 ;;
esac
