"""A training cluster in a Pulumi program of one's own, with tfk8s as a library (README.md).

The program owns everything it declares: its namespace, the data and log volumes the cluster
mounts, and one `tfk8s.TrainingCluster` (a parameter server's Deployment and Service, the workers'
Indexed Job and headless Service, the NetworkPolicy that keeps their gRPC among themselves). No
tfk8s stack files and no platform or tenant stack: the platform's facts are tfk8s's defaults.
"""

import pulumi
import pulumi_kubernetes as k8s
import tfk8s

config = pulumi.Config()
namespace_name = config.get("namespace") or "tfk8s-example"
host_path_root = config.get("hostPathRoot") or "/var/lib/tfk8s-example"
experiment = pulumi.get_stack()

# Our own provider, from our own config: an empty kubeconfig means the ambient one.
provider = k8s.Provider("kubernetes", kubeconfig=config.get("kubeconfig") or None)
with_provider = pulumi.ResourceOptions(provider=provider)

namespace = k8s.core.v1.Namespace(
    "namespace",
    metadata={"name": namespace_name, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
    opts=with_provider,
)


def volume(claim_name: str, size: str) -> k8s.core.v1.PersistentVolumeClaim:
    """A ReadWriteMany claim, pre-bound to a hostPath volume of its own (no provisioner needed)."""
    pv = k8s.core.v1.PersistentVolume(
        f"{claim_name}-volume",
        spec={
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"{host_path_root}/{namespace_name}/{claim_name}", "type": "DirectoryOrCreate"},
            "claimRef": {"namespace": namespace_name, "name": claim_name},
        },
        opts=with_provider,
    )
    return k8s.core.v1.PersistentVolumeClaim(
        claim_name,
        metadata={"name": claim_name, "namespace": namespace.metadata.name},
        spec={
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv.metadata.name,
            "resources": {"requests": {"storage": size}},
        },
        opts=with_provider,
    )


# The claims' names, not their Outputs: the pods need not wait for them to be created.
DATA_CLAIM, LOG_CLAIM = f"{experiment}-data", f"{experiment}-logs"
data, logs = volume(DATA_CLAIM, "1Gi"), volume(LOG_CLAIM, "1Gi")

owner = tfk8s.this_stack()
cluster = tfk8s.TrainingCluster(
    "mnist",
    tfk8s.TrainingClusterArgs(
        user="example",
        experiment=experiment,
        cluster=tfk8s.ClusterSettings(name="mnist", ps={"count": 1}, workers={"count": config.get_int("workers") or 2}),
        platform=tfk8s.standalone_platform(
            owner=owner, kubernetes_version=config.get("kubernetesVersion") or "1.34", storage_class=""
        ),
        owner=owner,
        namespace=namespace_name,
        data_claim=DATA_CLAIM,
        log_claim=LOG_CLAIM,
        # No tfk8s platform here, so no Layout kind to register the cluster with.
        publish_layout=False,
    ),
    # After the namespace and the volumes; every child of the cluster deploys with our provider.
    opts=pulumi.ResourceOptions(providers=[provider], depends_on=[namespace, data, logs]),
)

pulumi.export("namespace", namespace.metadata.name)
pulumi.export("clusterSpec", cluster.spec)  # the hosts TensorFlow dials: each resolves to exactly one task
pulumi.export("status", cluster.status)  # the PS Deployments' and the worker Job's, as Kubernetes reports them
pulumi.export("runUid", cluster.run_uid)  # the run: the uid of the Job the parameter servers watch
