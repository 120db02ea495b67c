"""`python -m tfk8s.cli`: the `tfk8s` command without its console script (the Makefile's `status`, `logs`)."""

import sys

from tfk8s.cli.main import main

sys.exit(main())
