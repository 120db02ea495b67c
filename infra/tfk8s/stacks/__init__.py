"""Each kind of stack's build (`platform`, `tenant`, `experiment`): its configuration read once, at the
edge (`config`), what it reads from the stacks it builds on (`outputs`, `ref`, `tenant_contract`),
then its components. Only `tfk8s.program` imports this layer, and `tfk8s.cli` its tenant contract's
reader (the import-linter contracts in pyproject.toml).
"""
