"""The seccomp filter for the sandbox: a BPF program for bwrap's `--seccomp FD`.

Namespaces do not cover everything. The kernel keyrings are the host's: a worker inherits alk's
session keyring (and, without a user namespace, its user's keyring), so a key it adds there is
still held by the next repeat, and by the user's session after alk exits. The filter makes such
calls fail with EPERM and allows the rest. The system's libseccomp (`libseccomp.so.2`, which apt
and systemd depend on) writes the program, through ctypes: it knows each architecture's syscall
numbers and the architecture checks (x32 included) that a hand-written filter gets wrong.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys

# The syscalls a worker has no business calling, from Docker's default seccomp profile
# (moby/profiles, seccomp/default.json, and the table of "significant syscalls blocked" in
# Docker's seccomp documentation). Docker's profile is an allow list; a worker only needs these
# few taken away, so ours is a deny list over the default "allow". Names this architecture does
# not have (vm86 outside i386, for one) are skipped.
BLOCKED: tuple[str, ...] = (
    # Kernel keyrings: the session keyring is alk's, so a key added there outlives the repeat.
    "add_key", "keyctl", "request_key",
    # Namespaces: a new user namespace gives back every capability bwrap dropped, and with it
    # the kernel code that only root could reach (clone with CLONE_NEWUSER is handled below).
    "unshare", "setns",
    # Mounts, the old and the new API: the worker's file system view is bwrap's to set.
    "mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr",
    # Host-wide state that only the host's root may change. These fail without capabilities
    # anyway; blocking them keeps a bug in a capability check out of reach.
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "settimeofday", "stime",
    "clock_settime", "clock_settime64", "iopl", "ioperm",
    # Opening any file by its handle bypasses the paths bwrap hid (the "shocker" escape);
    # name_to_handle_at makes the handles. Docker's documentation lists both; its current
    # profile allows name_to_handle_at again, which nothing a worker runs needs.
    "open_by_handle_at", "name_to_handle_at",
    # Tracing and reading the kernel: they leak the host's state (its kernel log, for one).
    "perf_event_open", "bpf", "lookup_dcookie", "syslog",
    # userfaultfd pauses the kernel mid-copy at will: a staple of kernel exploits.
    "userfaultfd",
    # io_uring: a frequent source of kernel exploits (Docker blocks it since 2023, moby#46762).
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # Obsolete interfaces that no current program calls and few kernels still test.
    "uselib", "_sysctl", "ustat", "sysfs", "vm86", "vm86old", "create_module",
    "get_kernel_syms", "query_module", "nfsservctl",
)

_LIBRARY = "libseccomp.so.2"

# What a warm start's prepared process may still call (docs/security.md, "Warm start"): each
# repeat it forks makes its own user, mount, PID and network namespaces and mounts in them,
# then installs the whole filter before any of the scenario runs. The prepared process keeps
# that reach into the kernel: it is part of what warm mode gives up.
PREPARED_ALLOWED = ("unshare", "mount", "umount", "umount2")

# libseccomp's seccomp.h: the actions, the masked-equality comparison, and struct scmp_arg_cmp.
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_MASKED_EQ = 7
_CLONE_NEWUSER = 0x10000000


def _scmp_act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    # For SCMP_CMP_MASKED_EQ, datum_a is the mask and datum_b the value.
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class _Unavailable(Exception):
    pass


def program(prepared: bool = False) -> bytes | None:
    """The BPF program (struct sock_filter instructions, as bwrap's --seccomp reads them), built
    once per process; None where it cannot be built here (see `unavailable_reason`).
    `prepared`: the looser one of a warm start's prepared process (`PREPARED_ALLOWED`)."""
    return _build(prepared)[0]


def unavailable_reason() -> str | None:
    """Why `program()` is None, for `alk doctor`; None when the program was built."""
    return _build()[1]


@functools.cache
def _build(prepared: bool = False) -> tuple[bytes | None, str | None]:
    if not sys.platform.startswith("linux"):
        return None, f"seccomp is Linux-only (this is {sys.platform})"
    try:
        lib = ctypes.CDLL(_LIBRARY)
    except OSError:
        return None, f"{_LIBRARY} was not found (Debian/Ubuntu: libseccomp2; Fedora: libseccomp)"
    try:
        return _compile(lib, prepared), None
    except (_Unavailable, AttributeError, OSError) as error:
        return None, f"the seccomp filter could not be built: {error}"


def _compile(lib: ctypes.CDLL, prepared: bool = False) -> bytes:
    # Without argtypes ctypes would pass the context pointer as a C int, cut to 32 bits.
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    # The _array form of seccomp_rule_add: ctypes cannot pass a struct through C varargs.
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.restype = None

    def number(name: str) -> int:
        # Negative: unknown to this libseccomp (-1), or not a syscall on this architecture.
        return int(lib.seccomp_syscall_resolve_name(name.encode()))

    def add(ctx: int, action: int, name: str, *conditions: _ArgCmp) -> None:
        args = (_ArgCmp * len(conditions))(*conditions) if conditions else None
        rc = lib.seccomp_rule_add_array(ctx, action, number(name), len(conditions), args)
        if rc < 0:
            raise _Unavailable(f"seccomp_rule_add({name}): {os.strerror(-rc)}")

    # Without a rule for clone3 a worker could ask it for CLONE_NEWUSER: refuse to build a
    # filter with that hole (a libseccomp older than the syscall).
    if number("clone3") < 0:
        raise _Unavailable("this libseccomp does not know clone3 (too old)")

    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise _Unavailable("seccomp_init failed")
    try:
        eperm = _scmp_act_errno(errno.EPERM)
        for name in BLOCKED:
            if number(name) >= 0 and not (prepared and name in PREPARED_ALLOWED):
                add(ctx, eperm, name)
        # clone with CLONE_NEWUSER: a user namespace, as unshare would make (other namespace
        # flags need capabilities the worker does not have). The flags are clone's first
        # argument, except on s390, whose clone takes the stack first; only the native
        # architecture is in the filter, so the native order is the one to match.
        flags = 1 if os.uname().machine.startswith("s390") else 0
        if not prepared:
            add(ctx, eperm, "clone", _ArgCmp(flags, _SCMP_CMP_MASKED_EQ, _CLONE_NEWUSER,
                                             _CLONE_NEWUSER))
        # clone3 takes its flags in a struct in memory, which a filter cannot read. ENOSYS
        # makes glibc (and everything else) fall back to clone, filtered above: Docker's way.
        add(ctx, _scmp_act_errno(errno.ENOSYS), "clone3")
        fd = os.memfd_create("alk-seccomp", os.MFD_CLOEXEC)
        try:
            rc = lib.seccomp_export_bpf(ctx, fd)
            if rc < 0:
                raise _Unavailable(f"seccomp_export_bpf: {os.strerror(-rc)}")
            size = os.fstat(fd).st_size
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)
