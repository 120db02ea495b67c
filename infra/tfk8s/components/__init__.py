"""Pulumi components, one per module: what each kind of stack is made of.

Each composes the pure builders of `tfk8s.specs` into resources (`tfk8s.kube.objects`), children
parented to it. Never imports a stack or a check (the import-linter contracts in pyproject.toml).
"""
