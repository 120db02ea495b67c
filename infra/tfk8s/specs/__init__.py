"""Pure builders and trait tables: labels, ownership marks, the TensorFlow cluster spec, roles, pod
templates, storage backends, network policies, quotas, sessions and readiness.

Plain functions of settings that return Kubernetes' own dicts, tested directly; no Pulumi resource
is created here. May import `tfk8s.settings` and `tfk8s.kube` (the import-linter contracts in pyproject.toml).
"""
