"""The program's start, as infra/__main__.py runs it: `boot()`, then `main()`.

`boot` does, in this order, what must come before the program's own modules are imported, each
for the program's fixed cost (paid by every `preview` and `up`):
1. the garbage collector's thresholds for a process that keeps its whole heap (tfk8s.gc_policy:
   the imports alone cost ~26 ms more under Python's defaults);
2. the Kubernetes provider's start and configuration, in the background (tfk8s.kube.objects
   .warm_up_provider), and the read of the stack this one builds on (tfk8s.stack_kinds.outputs
   .prefetch), both meanwhile: the imports take ~0.12 s;
3. no pydantic plugin lookup (it reads the entry points of every distribution in the virtualenv,
   TensorFlow's among them, when the first model is built: 4 ms of every import,
   bench/program_import.py). A user who wants a plugin sets the variable to something else.
`main` then imports the program (tfk8s.program) and runs it; the program's own errors leave as
`pulumi.RunError`s, which the CLI shows as their message alone (tfk8s.pulumi_errors). With
TFK8S_TIMINGS set, the phases `start` and `import` are marked as before (tfk8s.timings).

Standard library only at import, for the same reason: what this module imports runs before the
thresholds are set.
"""

from __future__ import annotations

import os


def boot() -> None:
    """Set up the process, and start what can run while the program imports (see the module)."""
    from tfk8s import gc_policy

    gc_policy.use_evaluation_thresholds()  # before the imports below: see tfk8s.gc_policy

    from tfk8s import timings
    from tfk8s.kube import objects as kube_objects
    from tfk8s.stack_kinds import outputs as stack_outputs

    timings.mark("start")
    kube_objects.warm_up_provider()
    stack_outputs.prefetch()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def main() -> None:
    """Import the program, then run it (after `boot`)."""
    from tfk8s import program, timings
    from tfk8s.pulumi_errors import shown_by_pulumi

    timings.mark("import")
    with shown_by_pulumi():
        program.main()
