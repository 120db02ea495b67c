"""`tfk8s doctor`: whether a cluster can run a tfk8s platform, before the first `pulumi up`.

It asks with the credentials the platform stack will run with, and answers per check with a
verdict (tfk8s.doctor.findings): what it read (tfk8s.doctor.reads: the server's version and
admission APIs, the rights the platform and tenant stacks need, storage, nodes and their
addresses, Kueue and JobSet, the Prometheus the platform names) and what it proved by doing in a
throwaway namespace it deletes whatever happens (tfk8s.doctor.network_probe: a Service name
resolved from a pod, a default-deny NetworkPolicy that really blocks and an allow policy that lets
through; tfk8s.doctor.probes: Pod Security admission, a ReadWriteMany claim two pods on two nodes
share, every image the platform names pulled and started). The checks follow a platform stack file's settings
(tfk8s.doctor.target), or the defaults without one. tfk8s.doctor.checkup runs them in order.
"""
