"""Entry point Pulumi runs (`main: infra/` in Pulumi.yaml)."""

import sys
from pathlib import Path

# The program directory holds the `tfk8s` package; make it importable however Pulumi starts us.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tfk8s import kube_objects, timings  # noqa: E402

timings.mark("start")
# Before the program's own imports and reads: the provider starts meanwhile (tfk8s.kube_objects).
kube_objects.warm_up_provider()
from tfk8s.program import main  # noqa: E402

timings.mark("import")
main()
