"""The files a run's reviewers and CI read, written next to `result.json` in
`reports/RUN_ID/`: `report.html` (the page and its transcripts), `report.md` (for a pull
request) and `junit.xml` (for a CI system's test view). A run of several lanes gets one of each
for all its lanes, in the run's own folder.

Each file is written whole (atomically) from the saved, redacted documents, so that it shows
what `result.json` says and nothing the redaction masked. A file that cannot be made is left
out with a warning, never at the cost of the run: its verdict and exit code are already set.
They are written with the usual mode (0644 under umask 022), to be attached to a ticket or
served from CI: they hold only the redacted text result.json holds (which, with the journal,
stays owner-only: it is the run's own record, read again by --resume).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from alk.files import write_atomically
from alk.layout import HTML_NAME, JUNIT_NAME, MARKDOWN_NAME, report_folder
from alk.result.document import RunDocument

if TYPE_CHECKING:
    from alk.compare import Comparison


@dataclass(frozen=True, slots=True)
class Written:
    """The report files written, and for each one that could not be, why."""

    paths: tuple[Path, ...]
    problems: tuple[str, ...]


def write_reports(documents: Sequence[RunDocument], out_dir: Path,
                  link_base: str | None = None) -> Written:
    """report.html, report.md and junit.xml of one run (one document per lane); report.md's
    links absolute under `link_base` when given (`alk.report.links`)."""
    folder = report_folder(out_dir, documents[0].run_id)

    def html() -> Iterable[bytes]:
        from alk.report.html.run_page import run_page_pieces

        return run_page_pieces(documents, out_dir)  # written as made: never whole in memory

    def markdown() -> bytes:
        from alk.report.markdown import run_markdown

        return run_markdown(documents, out_dir, link_base).encode("utf-8")

    def junit() -> bytes:
        from alk.report.junit import run_junit

        return run_junit(documents)

    makers: tuple[tuple[str, Callable[[], bytes | Iterable[bytes]]], ...] = (
        (HTML_NAME, html), (MARKDOWN_NAME, markdown), (JUNIT_NAME, junit))
    return _write(folder, makers)


def write_compare_page(comparison: Comparison, out_dir: Path) -> Written:
    """The `alk compare A B` page, in B's report folder: `compare-A.html`."""
    from alk.report.html.compare_page import compare_page

    name = f"compare-{comparison.a.run_id.replace('/', '-')}.html"
    return _write(report_folder(out_dir, comparison.b.run_id),
                  ((name, lambda: compare_page(comparison, out_dir).encode("utf-8")),))


def _write(folder: Path,
           makers: Sequence[tuple[str, Callable[[], bytes | Iterable[bytes]]]]) -> Written:
    paths: list[Path] = []
    problems: list[str] = []
    for name, make in makers:
        path = folder / name
        try:
            write_atomically(path, make(), readable=True)
        except OSError as exc:
            problems.append(f"{path}: cannot be written ({exc.strerror or exc}); the run's "
                            "result.json holds everything: `alk report RUN_ID` writes it again")
            continue
        except Exception as exc:  # noqa: BLE001 - a report's bug must not cost the run
            problems.append(f"{path}: not written: {type(exc).__name__}: {exc} (a bug in alk; "
                            "please report it with the run's result.json)")
            continue
        paths.append(path)
    return Written(tuple(paths), tuple(problems))
