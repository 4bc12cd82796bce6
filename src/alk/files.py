"""Files alk writes whole or not at all: `write_atomically`.

A reader (a person, `alk report`, a resume after a kill) sees the old file or the new one,
never half of either, and the new one is on disk before the call returns.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable


def write_atomically(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Writes `data` to a temporary file beside `path`, fsyncs it and puts it in its place:
    bytes, or pieces of them written as they come (a page never whole in memory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            for piece in (data,) if isinstance(data, bytes) else data:
                file.write(piece)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
