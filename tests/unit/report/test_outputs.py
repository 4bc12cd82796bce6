"""alk.report.outputs: the report files are written with the usual mode (the umask's), to be
attached to a ticket or served from CI, while the run's own record stays owner-only; and
`link_base` reaches report.md."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from alk import api
from alk.errors import UsageError
from alk.layout import HTML_NAME, JUNIT_NAME, MARKDOWN_NAME

from helpers import documents

pytestmark = pytest.mark.usefixtures("private_temp")


@pytest.fixture
def umask():
    def set_to(mask: int) -> None:
        os.umask(mask)

    before = os.umask(0o022)
    yield set_to
    os.umask(before)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_report_files_get_the_mode_the_umask_leaves(tmp_path: Path, umask, mask, mode) -> None:
    document = documents.passed(tmp_path)
    umask(mask)
    written = api.write_reports([document], tmp_path)
    assert sorted(path.name for path in written.paths) == sorted(
        (HTML_NAME, MARKDOWN_NAME, JUNIT_NAME))
    for path in written.paths:
        assert stat.S_IMODE(path.stat().st_mode) == mode, path.name
    # The run's record is alk's own, read again by --resume: owner-only whatever the umask.
    [record] = (tmp_path / "reports").glob("*/result.json")  # under the run's own id
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert not [p for p in written.paths[0].parent.iterdir() if p.name.endswith(".tmp")]


def test_the_link_base_reaches_report_md_and_a_bad_one_is_refused_first(tmp_path: Path) -> None:
    document = documents.passed(tmp_path)
    api.write_reports([document], tmp_path, link_base="https://ci.example.com/a/")
    folder = tmp_path / "reports" / document.run_id
    text = (folder / MARKDOWN_NAME).read_text()
    assert f"(https://ci.example.com/a/reports/{document.run_id}/report.html)" in text
    (folder / MARKDOWN_NAME).unlink()
    with pytest.raises(UsageError, match="--link-base"):
        api.write_reports([document], tmp_path, link_base="not a url")
    assert not (folder / MARKDOWN_NAME).exists()
    with pytest.raises(UsageError, match="--link-base"):
        api.RunSetup(out_dir=tmp_path, link_base="file:///tmp")
