"""Each kind of stack's build (`platform`, `tenant`, `experiment`): its configuration read once, at the
edge (`config`), what it reads from the stacks it builds on (`outputs`, `ref`, `tenant_contract`),
then its components. `tfk8s.program` imports this layer whole; the others that import from it take
one piece each: `tfk8s.entry` the read of the stack a stack builds on (`outputs`), `tfk8s.library`
the platform's build, `tfk8s.component_package` a queued cluster's status (`queue_status`), `tfk8s.cli` the
tenant contract's reader, and `tfk8s.doctor` and `tfk8s_gitops.operator` the stack file's schema
check (`config`). The layer order is the import-linter contracts' in pyproject.toml.
"""
