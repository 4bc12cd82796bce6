"""Files alk writes whole or not at all: `write_atomically`.

A reader (a person, `alk report`, a resume after a kill) sees the old file or the new one,
never half of either, and the new one is on disk before the call returns.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Writes `data` to a temporary file beside `path`, fsyncs it and puts it in its place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
