"""``python -m tfk8s_train train|prepare-data ...``."""

import sys

from tfk8s_train.cli import main

sys.exit(main())
