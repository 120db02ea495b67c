"""Checks before anything is declared: a stack file in its context, an identity's access, the
quota, a tenant against its platform (whether there is a cluster at all: tfk8s.kube.client.connect).

Each finds problems that name the key and the fix; none creates a resource. Beside the components:
neither imports the other (the import-linter contracts in pyproject.toml).
"""
