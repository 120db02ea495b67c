"""The pack's tests run in the pack's own virtualenv (make test-policies): the pack's directory on the path."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
