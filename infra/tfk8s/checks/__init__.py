"""Checks before anything is declared: the cluster (`preflight`), a stack file in its context, an
identity's access, the quota, a tenant against its platform.

Each finds problems that name the key and the fix; none creates a resource. Beside the components:
neither imports the other (the import-linter contracts in pyproject.toml).
"""
