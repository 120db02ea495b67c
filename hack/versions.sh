# Pinned toolchain versions, one place. Sourced by hack/*.sh and read by the Makefile.
#
# Pulumi: the newest CLI release whose pkg module the Go proxy here serves is 3.259.0; the
# Python SDK is pinned to the same release in pyproject.toml.
PULUMI_VERSION=3.259.0
# The Pulumi YAML language host for YAML programs that use the component package (issue 39):
# v1.26.2 is the first with Link, which `pulumi package add` calls; the proxy serves v1.38.1.
PULUMI_YAML_VERSION=v1.38.1
# pulumi-kubernetes publishes no provider module tags; this commit's pseudo-version is
# served, and PyPI has the SDK built from the very same commit (4.25.0a1768448096).
K8S_PROVIDER_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199
K8S_PROVIDER_VERSION=4.25.0-alpha.1768448096
K8S_PROVIDER_SDK_GO_VERSION=4.25.0
KUBE_VERSION=1.34.4
# The seed's storage (the in-tree kubernetes.io/glusterfs provisioner) exists only up to 1.25:
# a second, older control plane for the tests that need it (hack/cluster.sh start --kube 1.25).
# 1.25.16 cannot build here (the proxy refuses k8s.io/cluster-bootstrap@v0.25.16); 1.25.15 does.
KUBE_LEGACY_VERSION=1.25.15
ETCD_VERSION=3.6.5
KWOK_VERSION=v0.8.0
# The NetworkPolicy engine the e2e tests evaluate the live policies with (kwok enforces none).
CYCLONUS_VERSION=v0.5.6
# The S3 server the GitOps tests keep team state in (hack/tools.sh versitygw; docs/guide/gitops.md).
VERSITYGW_VERSION=v1.8.0
# The AWS KMS API the GitOps tests and the fleet bench encrypt stacks' secrets with instead of a
# passphrase (hack/tools.sh local-kms; docs/guide/gitops.md). No tags: the newest commit's
# pseudo-version, which go install builds (no replaces).
LOCAL_KMS_VERSION=v0.0.0-20260228092603-2a5e92d09ab6
# The Prometheus the e2e tests scrape a real run with (docs/guide/monitoring.md). Its Go module's
# v0.3XX.Y tags are Prometheus 3.XX.Y: v0.316.0 is 3.16.0 (go install builds it, no replaces).
PROMETHEUS_VERSION=v0.316.0
# Queueing (issue 38): Kueue admits a training cluster as one workload, JobSet makes PS, workers
# and chief one object Kueue can admit. Both install with go install (no replaces; go 1.25).
KUEUE_VERSION=v0.17.0
# Served by the module proxy although its list does not show it (checked with go mod download).
JOBSET_VERSION=v0.11.1
# The linter of .github/workflows (make lint).
ACTIONLINT_VERSION=v1.7.12
# The cluster DNS of the real node (lab/realnode.sh; kubelet and kube-proxy are KUBE_VERSION's).
COREDNS_VERSION=v1.14.7
# The real node's NetworkPolicy enforcer (lab/realnode.sh): kube-router's firewall alone. The
# proxy here serves v2.10.0 but not the netlink pseudo-version it pins, so it builds against the
# newest netlink release the proxy has (hack/tools.sh build_kube_router).
KUBE_ROUTER_VERSION=v2.10.0
KUBE_ROUTER_NETLINK_VERSION=v1.3.1
