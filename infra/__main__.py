"""Entry point Pulumi runs (`main: infra/` in Pulumi.yaml): `boot()`, then `main()` (tfk8s.entry)."""

import sys
from pathlib import Path

# The program directory holds the `tfk8s` package; make it importable however Pulumi starts us.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tfk8s.entry import boot, main

boot()
main()
