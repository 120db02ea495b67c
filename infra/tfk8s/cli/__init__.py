"""`tfk8s`, the command a tenant's user runs beside `pulumi` (docs/guide/status.md): `tfk8s status`
draws each training cluster's progress and `tfk8s logs` prints a task's log, both read through her
TensorBoard's gate (tfk8s_train.gate_routes, asked through tfk8s.tenant_gate) with her own token,
from her own log volume.

The top layer, beside the program's entry (the import-linter contracts in pyproject.toml): it
declares nothing, and reads what the layers below publish: the experiment stack's outputs (through
the `pulumi` CLI), the tenant's contract and token Secret (with the user's own kubeconfig).
"""
