"""tfk8s's component provider: serves `tfk8s:index:TrainingCluster` (tfk8s.component_package.provider) to the
Pulumi engine, its schema inferred from the component's annotations (package/schema.json is a copy).

It runs tfk8s from the checkout it sits in, as tfk8s's own program does (Pulumi.yaml `main:
infra`): the code the package's version names, whatever else the plugin's virtualenv holds.
Nothing may write to stdout before the provider prints its port.
"""

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(CHECKOUT / "infra"), str(CHECKOUT / "training")]

from tfk8s.component_package import provider  # noqa: E402

if __name__ == "__main__":
    provider.serve()
