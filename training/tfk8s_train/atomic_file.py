"""A file replaced whole (standard library only: the launcher imports it in stock images, on
Python 3.6 and newer).

What a task writes for others to read while the run goes on (its progress, its result, the run's
lineage and done markers) is written to a temporary file beside it and renamed over it. A rename is
atomic within one filesystem, the log volume's included, so a reader sees the old file or the new
one, never half of one. The temporary's name starts with a dot and does not end like the file's, so
a reader's pattern (``*.json``, a task's name) never matches it.
"""

import os
import tempfile
from pathlib import Path
from typing import Union


def write_text(path: Union[str, Path], text: str) -> Path:
    """Replace ``path`` with ``text``, its directory made first; the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix="." + path.name + ".")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, str(path))
    except BaseException:
        os.unlink(tmp)  # nothing half-written left beside the file
        raise
    return path
