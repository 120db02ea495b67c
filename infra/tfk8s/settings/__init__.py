"""The stack files' schema, whole: the `tfk8s:` config namespace and the model of each kind of stack.

Three kinds of stack share the project (see docs/concepts/stacks.md): a platform stack
(`tfk8s:kind: platform`, `tfk8s.settings.platform`), one tenant stack per user (`tfk8s:kind: tenant`,
`tfk8s.settings.tenant`) and experiment stacks (`tfk8s:kind: experiment`, `tfk8s.settings.experiment`).
The models are pydantic v2, frozen, with camelCase aliases (the names in the stack file),
`extra="forbid"` (a typo is an error, never a silent default) and each field's documentation next
to it (`tfk8s.settings.types.Model`). `tfk8s.settings.stack_file` validates raw config with them;
`hack/schema.py` publishes their JSON Schema for editors. Nothing here touches Pulumi.
"""

from __future__ import annotations

from tfk8s.settings.experiment import ExperimentStack
from tfk8s.settings.platform import PlatformStack
from tfk8s.settings.tenant import TenantStack
from tfk8s.settings.types import Model

# The stack file's keys are `tfk8s:<key>`; other namespaces (kubernetes:, pulumi:) are not ours.
NAMESPACE = "tfk8s"

STACK_KINDS: dict[str, type[Model]] = {"platform": PlatformStack, "tenant": TenantStack, "experiment": ExperimentStack}
