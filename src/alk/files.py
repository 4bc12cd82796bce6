"""Files alk writes whole or not at all: `write_atomically`.

A reader (a person, `alk report`, a resume after a kill) sees the old file or the new one,
never half of either, and the new one is on disk before the call returns.

A file is owner-only (0600) unless `readable`: then it gets the usual mode, 0666 less the
umask (0644 under umask 022), as `open()` would make it. The run's own records (result.json,
the journal) stay owner-only; the report files, made to be attached and served, are readable.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Iterable


def write_atomically(path: Path, data: bytes | Iterable[bytes], *,
                     readable: bool = False) -> None:
    """Writes `data` to a temporary file beside `path`, fsyncs it and puts it in its place:
    bytes, or pieces of them written as they come (a page never whole in memory). The file
    is owner-only, or with `readable` of the mode the umask leaves (the temporary file's,
    which the rename keeps)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if readable:
        fd, temp = _readable_temp(path)
    else:
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


def _readable_temp(path: Path) -> tuple[int, str]:
    """A new temporary file beside `path`, created 0666 so that the kernel applies the umask
    (mkstemp's files are 0600 whatever it is; reading the umask would change it for a moment,
    for every thread of the process)."""
    while True:
        temp = str(path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), temp
        except FileExistsError:
            continue
