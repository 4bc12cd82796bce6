"""A served tool's effect in the workspace (`effect = "lab-output/effects.json"`): alk appends
the call's arguments to a JSON array there, itself, while the worker runs beside it.

The worker owns that folder and may have put anything at the path: a symlink to one of alk's
own files, a FIFO, a file of gigabytes. So the path is walked one folder at a time from the
workspace with O_NOFOLLOW (a symlink is never followed, wherever it points), the file is read
only when it is a regular file and within a size, and the new array is written beside it and
renamed into place, through the same folder descriptor.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from alk import untrusted_json

MAX_EFFECTS_BYTES = 1024 * 1024
MAX_EFFECTS = 1_000
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class EffectRefused(Exception):
    """The effect could not be made: the call answers with this error, and alk goes on."""


def append_effect(workspace: Path, relative: str, entry: Any) -> int:
    """Appends `entry` to the JSON array at `relative` in `workspace`; returns its length."""
    *folders, name = PurePosixPath(relative).parts
    fd = os.open(workspace, _FOLDER)
    try:
        for folder in folders:
            try:
                os.mkdir(folder, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                inner = os.open(folder, _FOLDER, dir_fd=fd)
            except OSError as exc:
                raise EffectRefused(f"{relative}: {folder} is not a folder alk may enter "
                                    f"({exc.strerror})") from None
            os.close(fd)
            fd = inner
        effects = _read(fd, name, relative)
        if len(effects) >= MAX_EFFECTS:
            raise EffectRefused(f"{relative} holds {len(effects)} effects, alk's most")
        effects.append(entry)
        _write(fd, name, json.dumps(effects).encode())
        return len(effects)
    finally:
        os.close(fd)


def _read(fd: int, name: str, relative: str) -> list[Any]:
    try:
        file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                       dir_fd=fd)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise EffectRefused(f"{relative} cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode):
            raise EffectRefused(f"{relative} is not a regular file")
        data = os.read(file, MAX_EFFECTS_BYTES + 1)
    finally:
        os.close(file)
    if len(data) > MAX_EFFECTS_BYTES:
        raise EffectRefused(f"{relative} is over {MAX_EFFECTS_BYTES // (1024 * 1024)} MiB")
    if not data.strip():
        return []
    try:
        effects = untrusted_json.parse(data.decode("utf-8", "replace"))
    except untrusted_json.Rejected as exc:
        raise EffectRefused(f"{relative} is not JSON ({exc})") from None
    if not isinstance(effects, list):
        raise EffectRefused(f"{relative} holds JSON that is not an array")
    return effects


def _write(fd: int, name: str, data: bytes) -> None:
    temp = f".{name}.alk-{os.getpid()}.tmp"
    try:
        os.unlink(temp, dir_fd=fd)
    except FileNotFoundError:
        pass
    file = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o644, dir_fd=fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(file, view):]
    finally:
        os.close(file)
    os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
