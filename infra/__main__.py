"""Entry point Pulumi runs (`main: infra/` in Pulumi.yaml)."""

import os
import sys
from pathlib import Path

# The program directory holds the `tfk8s` package; make it importable however Pulumi starts us.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tfk8s import gc_policy  # noqa: E402

gc_policy.use_evaluation_thresholds()  # before the imports below: see tfk8s.gc_policy

from tfk8s import kube_objects, stack_outputs, timings  # noqa: E402

timings.mark("start")
# Before the program's own imports and reads: the provider starts meanwhile (tfk8s.kube_objects),
# and the stacks this one builds on are read (tfk8s.stack_outputs).
kube_objects.warm_up_provider()
stack_outputs.prefetch()
# tfk8s uses no pydantic plugin, and finding them reads the entry points of every distribution in
# the virtualenv (TensorFlow's among them) when the first model is built: 4 ms of every command's
# import (bench/program_import.py). A user who wants a plugin sets the variable to something else.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
from tfk8s.program import main  # noqa: E402

timings.mark("import")
main()
