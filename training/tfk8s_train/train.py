"""``python -m tfk8s_train.train [flags]``: shorthand for ``python -m tfk8s_train train``."""

import sys

from tfk8s_train.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
