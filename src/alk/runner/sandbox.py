"""The file system a sandboxed worker sees, as bubblewrap's arguments.

Only what a worker needs is there, read-only: the system's programs and libraries (/usr and the
/bin, /lib... links into it), a short list of /etc entries (the dynamic linker, users and groups,
name resolution, time zone, TLS certificates), `/sys`, its interpreter and installed packages,
the lane's folder, its program and the SDK. It writes only to its workspace, a private /tmp and
/dev/shm, both sized from its memory limit (tmpfs is memory the worker's RSS does not show).
Nothing of /root, /home, /var, /srv, /run or other projects is bound; alk's own output and the
run's other workspaces are hidden under empty read-only mounts where they lie inside a visible
folder. As root, alk runs the worker as nobody (the init drops it), so that root-only files stay
unreadable even where they are bound.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from dataclasses import dataclass


# What a program needs of /etc; never shadow files, ssh keys or other credentials.
ETC_ENTRIES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf",
    "host.conf", "hosts", "resolv.conf", "gai.conf", "services", "protocols", "networks",
    "localtime", "timezone", "locale.alias", "locale.conf", "mime.types", "os-release",
    "debian_version", "alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "pki",
    "crypto-policies", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}",
)
# Merged-/usr systems link these into /usr; older ones have real folders.
SYSTEM_FOLDERS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# The user a worker runs as when alk is root: nobody.
NOBODY = 65534
# A hidden folder's empty stand-in.
MASK_BYTES = 4096


@dataclass(frozen=True, slots=True)
class View:
    """What to bind: `visible` read-only, `hidden` masked, `workspace` writable; `tmpfs_bytes`
    sizes /tmp and /dev/shm each (None: the kernel's default, half the machine's memory)."""

    workspace: str
    visible: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    tmpfs_bytes: int | None = None


def worker_uid() -> int | None:
    """The user a sandboxed worker runs as, when not alk's own: nobody, where alk may switch."""
    return NOBODY if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def give_workspace(path: str, uid: int | None) -> None:
    """Makes the workspace the worker's own when it runs as another user; the init (root with
    no capabilities but those it needs) must still enter it."""
    if uid is not None:
        os.chown(path, uid, uid)
        os.chmod(path, 0o711)


def bwrap_args(bwrap: str, view: View, *, offline: bool, drop_to: int | None = None,
               seccomp_fd: int | None = None, prepare: bool = False) -> tuple[str, ...]:
    """bwrap's argv, up to and including `--`; the init and the worker's argv follow.
    `offline`: a network namespace of its own (network `none`). `prepare`: a warm start's
    prepared process, whose first step (root, before the init) mounts /proc afresh: bwrap's
    has read-only mounts over parts of it, and the kernel lets a user namespace mount a /proc
    only where one is wholly visible. That step drops both capabilities before the init runs."""
    args = [bwrap, *_system(view.tmpfs_bytes)]
    args += _mounts(view)
    args += ["--chdir", view.workspace, "--unshare-pid", "--as-pid-1", "--unshare-ipc",
             "--unshare-uts", *(("--unshare-net",) if offline else ()),
             "--die-with-parent", "--cap-drop", "ALL"]
    if drop_to is not None:
        # Only the init keeps these: to switch the worker to `drop_to` (the switch away from
        # root clears every capability before the worker's program starts), and to signal it
        # and end its namespace once it runs as another user.
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
    if prepare:
        args += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return (*args, "--remount-ro", "/", "--")


# The system's part of the sandbox and the folders a run shows are the same for each of its
# repeats: they are worked out once (about 90 µs a repeat, most of it looking at the file
# system), and only the workspace is added each time.
@functools.lru_cache(maxsize=8)
def _system(tmpfs_bytes: int | None) -> tuple[str, ...]:
    """The system's programs and libraries, /etc's short list, /sys, /proc, /dev, /tmp."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_FOLDERS:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # /proc/sys stays read-only: the host's kernel settings (core_pattern runs a program as
    # root on the next crash) are not the worker's to change.
    args += ["--ro-bind-try", "/sys", "/sys", "--proc", "/proc",
             "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
    args += _sized(tmpfs_bytes, "/dev/shm") + ["--remount-ro", "/dev"]
    args += _sized(tmpfs_bytes, "/tmp")
    return tuple(args)


def _sized(size: int | None, path: str) -> list[str]:
    return [*(("--size", str(size)) if size else ()), "--perms", "1777", "--tmpfs", path]


def _mounts(view: View) -> list[str]:
    """Visible folders, masks over hidden ones and the workspace, shallowest first so that a
    mount inside another is made after it; the folders bwrap creates on the way are 0755 (its
    default, 0700, would shut out a worker that runs as another user)."""
    shown, hidden = _shown(view.visible, view.hidden)
    mounts = sorted([*shown, (view.workspace, "rw")], key=lambda m: (m[0].count("/"), m[0]))
    args: list[str] = []
    made: set[str] = set()
    for path, kind in mounts:
        for folder in _ancestors(path):
            if folder not in made and folder not in ("/tmp", "/usr"):
                made.add(folder)
                args += ["--perms", "0755", "--dir", folder]
        if kind == "ro":
            args += ["--ro-bind", path, path]
        elif kind == "mask":
            args += ["--size", str(MASK_BYTES), "--perms", "0555", "--tmpfs", path]
        else:
            args += ["--bind", path, path]
    for path in hidden:
        args += ["--remount-ro", path]
    return args


@functools.lru_cache(maxsize=8)
def _shown(visible: tuple[str, ...], hidden: tuple[str, ...]
           ) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The read-only binds and the masks over hidden folders inside them, as (path, kind);
    and the masked folders."""
    outer = _outermost(visible, hidden)
    masked = tuple(h for h in hidden if any(_inside(h, v) for v in outer) and os.path.isdir(h))
    return (*((v, "ro") for v in outer), *((h, "mask") for h in masked)), masked


def _outermost(paths: tuple[str, ...], hidden: tuple[str, ...]) -> list[str]:
    """Drops a path another one already shows, unless a hidden folder lies between them (then
    it must be bound again on top of the mask)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if path in ("/", "/tmp") or _inside(path, "/usr") or not os.path.exists(path):
            continue
        shown = any(_inside(path, outer) and not any(_inside(path, h) and _inside(h, outer)
                                                     for h in hidden) for outer in kept)
        if not shown:
            kept.append(path)
    return kept


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:n]) for n in range(1, len(parts) + 1)]


def visible_paths(argv: tuple[str, ...], lane_root: str, path_env: str | None,
                  extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What a sandboxed worker must read: the lane's folder, alk's interpreter (and the folders
    its `.pth` files add, such as an editable install), and for each file the command names
    (the program found through PATH too) the file, its folder and, for an interpreter in a
    virtual environment, that environment. Never alk's user's home folder, nor a folder that
    holds it (a lane kept at `~/lanes/` has the home folder as its root): what is in it, SSH
    keys and cloud credentials, is not a worker's to read."""
    paths = {os.path.realpath(lane_root), sys.prefix, sys.base_prefix, *extra}
    paths.update(_pth_folders())
    for arg in command_files(argv, path_env):
        for path in {os.path.abspath(arg), os.path.realpath(arg)}:
            paths.add(path)
            if os.path.isdir(path):
                continue  # a folder argument: that folder, not its parent
            folder = os.path.dirname(path)  # a file: its siblings too (a script's modules)
            paths.add(folder)
            if os.path.exists(os.path.join(os.path.dirname(folder), "pyvenv.cfg")):
                paths.add(os.path.dirname(folder))
    home = os.path.realpath(os.path.expanduser("~"))
    return tuple(sorted(p for p in paths if not _inside(home, p)))


def command_files(argv: tuple[str, ...], path_env: str | None) -> list[str]:
    """The files and folders a command names by absolute path, its program found through PATH
    too."""
    program = shutil.which(argv[0], path=path_env) or argv[0]
    return [arg for arg in (program, *argv[1:]) if os.path.isabs(arg) and os.path.exists(arg)]


def unseen(path: str, visible: tuple[str, ...]) -> bool:
    """Is an existing `path` outside every visible folder (and not part of the system)?"""
    return (os.path.exists(path) and not _inside(path, "/usr")
            and not any(_inside(path, v) for v in visible))


def unreadable(path: str, visible: tuple[str, ...]) -> str | None:
    """Why a worker running as another user could not read `path` in the sandbox (a folder on
    the way without o+x, or the file without o+r), or None. Folders above the visible one
    holding it are bwrap's own, made 0755."""
    roots = [v for v in visible if _inside(path, v)]
    if not roots or not os.path.exists(path):
        return None
    root = max(roots, key=len)
    folder = os.path.dirname(path) if not os.path.isdir(path) else path
    parts = [folder]
    while parts[-1] != root and _inside(parts[-1], root):
        parts.append(os.path.dirname(parts[-1]))
    for part in parts:
        if os.stat(part).st_mode & 0o001 == 0:
            return f"{part} (mode {os.stat(part).st_mode & 0o777:04o}, no o+x)"
    if not os.path.isdir(path) and os.stat(path).st_mode & 0o004 == 0:
        return f"{path} (mode {os.stat(path).st_mode & 0o777:04o}, no o+r)"
    return None


def _pth_folders() -> set[str]:
    """Folders named by the `.pth` files of alk's interpreter (lines that are paths, not code)."""
    import site

    found: set[str] = set()
    for packages in site.getsitepackages():
        try:
            names = [n for n in os.listdir(packages) if n.endswith(".pth")]
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(packages, name), encoding="utf-8") as handle:
                    lines = handle.read(64 * 1024).splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                line = line.strip()
                if line.startswith("/") and os.path.isdir(line):
                    found.add(os.path.realpath(line))
    return found
