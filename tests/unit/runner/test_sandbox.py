"""alk.runner.sandbox: what a sandboxed worker sees, as bubblewrap's arguments (no process here;
tests/runner and tests/hostile run them)."""

from __future__ import annotations

import os
from pathlib import Path

from alk.runner.sandbox import MASK_BYTES, View, bwrap_args, unreadable, unseen, visible_paths


def pairs(args, option):
    """The operands of every `option` in argv (two for binds)."""
    found = []
    for index, arg in enumerate(args):
        if arg == option:
            found.append(tuple(args[index + 1:index + 3]))
    return found


def test_only_the_system_and_what_the_worker_needs_are_bound(tmp_path):
    lane = tmp_path / "project"
    lane.mkdir()
    args = bwrap_args("bwrap", View(workspace=str(tmp_path / "ws"), visible=(str(lane),)),
                      offline=True)
    sources = {source for source, _ in pairs(args, "--ro-bind")}
    sources |= {source for source, _ in pairs(args, "--ro-bind-try")}
    assert "/" not in sources
    assert not [s for s in sources if s.split("/")[1] in ("root", "home", "var", "srv", "run")]
    etc = {s for s in sources if s.startswith("/etc/")}
    assert "/etc/passwd" in etc and "/etc/ld.so.cache" in etc
    assert not etc & {"/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers"}
    assert str(lane) in sources
    assert (str(tmp_path / "ws"), str(tmp_path / "ws")) in pairs(args, "--bind")
    assert "--unshare-net" in args and args[-3:] == ("--remount-ro", "/", "--")


def test_tmp_and_dev_shm_are_sized_and_dev_is_read_only():
    args = bwrap_args("bwrap", View(workspace="/w", tmpfs_bytes=128 * 1024 * 1024), offline=False)
    tmpfs = [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"]
    assert tmpfs == ["/dev/shm", "/tmp"]
    sizes = [args[i + 1] for i, a in enumerate(args) if a == "--size"]
    assert sizes == [str(128 * 1024 * 1024)] * 2
    assert ("/dev",) == tuple(args[args.index("--remount-ro") + 1:args.index("--remount-ro") + 2])
    assert "--unshare-net" not in args


def test_hidden_folders_inside_a_visible_one_are_masked_and_later_mounts_go_on_top(tmp_path):
    lane, run = tmp_path, tmp_path / "tmp" / "alk-run"
    (tmp_path / "transcripts").mkdir()
    (run / "sdk").mkdir(parents=True)
    (run / "w-1").mkdir()
    view = View(workspace=str(run / "w-1"), visible=(str(lane), str(run / "sdk")),
                hidden=(str(tmp_path / "transcripts"), str(run), "/elsewhere"))
    args = list(bwrap_args("bwrap", view, offline=True))
    masks = [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs" and args[i - 1] == "0555"]
    assert masks == [str(tmp_path / "transcripts"), str(run)]
    mask = args.index("--tmpfs", args.index(str(lane)))
    assert args[mask - 4:mask] == ["--size", str(MASK_BYTES), "--perms", "0555"]
    position = {path: args.index(path) for path in (str(lane), str(run), str(run / "sdk"),
                                                    str(run / "w-1"))}
    # The lane first, the mask over the run's folder next, then the SDK and workspace on top.
    assert position[str(lane)] < position[str(run)] < position[str(run / "sdk")]
    assert position[str(run)] < position[str(run / "w-1")]
    remounted = [args[i + 1] for i, a in enumerate(args) if a == "--remount-ro"]
    assert str(run) in remounted and str(tmp_path / "transcripts") in remounted


def test_each_repeat_of_a_run_gets_its_own_workspace_and_the_same_rest(tmp_path):
    # What a run shows is worked out once; only the workspace differs from repeat to repeat.
    lane, run = tmp_path / "lane", tmp_path / "alk-run"
    for folder in (lane, run / "sdk", run / "w-1", run / "w-2"):
        folder.mkdir(parents=True)
    views = [View(workspace=str(run / name), visible=(str(lane), str(run / "sdk")),
                  hidden=(str(run),), tmpfs_bytes=size)
             for name, size in (("w-1", None), ("w-2", None), ("w-1", 1 << 20))]
    first, second, sized = (bwrap_args("bwrap", view, offline=True) for view in views)
    assert (str(run / "w-1"),) * 2 in pairs(first, "--bind")
    assert (str(run / "w-2"),) * 2 in pairs(second, "--bind")
    assert [arg.replace("w-2", "w-1") for arg in second] == list(first)
    assert "--size" not in first and sized.count(str(1 << 20)) == 2


def test_folders_bwrap_makes_on_the_way_are_open_to_another_user(tmp_path):
    workspace = "/tmp/alk-1/w-2"
    args = list(bwrap_args("bwrap", View(workspace=workspace), offline=False))
    made = [args[i + 1] for i, a in enumerate(args) if a == "--dir"]
    assert "/tmp/alk-1" in made
    assert args[args.index("/tmp/alk-1") - 2:args.index("/tmp/alk-1")] == ["0755", "--dir"]


def test_nested_visible_paths_are_bound_once_unless_a_mask_lies_between(tmp_path):
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    args = bwrap_args("bwrap", View(workspace="/w", visible=(str(tmp_path), str(inner))),
                      offline=False)
    binds = [source for source, _ in pairs(args, "--ro-bind")]
    assert str(tmp_path) in binds and str(inner) not in binds


def test_only_a_dropping_init_keeps_capabilities_and_seccomp_is_passed(tmp_path):
    plain = bwrap_args("bwrap", View(workspace="/w"), offline=False)
    assert "--cap-add" not in plain and "--seccomp" not in plain
    dropping = list(bwrap_args("bwrap", View(workspace="/w"), offline=False, drop_to=65534,
                               seccomp_fd=7))
    assert [dropping[i + 1] for i, a in enumerate(dropping) if a == "--cap-add"] == [
        "CAP_SETUID", "CAP_SETGID", "CAP_KILL"]
    assert dropping[dropping.index("--seccomp") + 1] == "7"


def test_unreadable_names_the_folder_or_file_another_user_cannot_pass(tmp_path):
    project = tmp_path / "project"
    (project / "workers").mkdir(parents=True)
    program = project / "workers" / "w.py"
    program.write_text("")
    project.chmod(0o755)
    (project / "workers").chmod(0o755)
    program.chmod(0o644)
    assert unreadable(str(program), (str(project),)) is None
    (project / "workers").chmod(0o700)
    assert unreadable(str(program), (str(project),)).startswith(str(project / "workers"))
    (project / "workers").chmod(0o755)
    program.chmod(0o600)
    assert "no o+r" in unreadable(str(program), (str(project),))
    # A folder above the bound one is bwrap's own (0755): it does not count.
    os.chmod(tmp_path, 0o700)
    try:
        program.chmod(0o644)
        assert unreadable(str(program), (str(project),)) is None
    finally:
        os.chmod(tmp_path, 0o755)
    assert unreadable(str(Path("/nonexistent/x")), (str(project),)) is None


def test_the_home_folder_and_folders_above_it_are_never_visible(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "project" / "workers").mkdir(parents=True)
    program = home / "project" / "workers" / "w.py"
    program.write_text("")
    monkeypatch.setenv("HOME", str(home))
    # A lane kept at ~/lanes/ has the home folder as its root: it must not be bound whole.
    shown = visible_paths(("python", str(program)), str(home), "/bin")
    assert str(home) not in shown and str(tmp_path) not in shown
    assert str(home / "project" / "workers") in shown  # the program's own folder still is
    assert unseen(str(home / ".ssh"), shown) is False  # (does not exist)
    (home / ".ssh").mkdir()
    assert unseen(str(home / ".ssh" / "id"), shown) is False  # nor does this file
    (home / ".ssh" / "id").write_text("key")
    assert unseen(str(home / ".ssh" / "id"), shown)
