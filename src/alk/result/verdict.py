"""A run's verdict: the pass rule (`alk.result.rule`) applied to its documents, and the exit
code it gives: FAIL (1), else VOID (3), else PASS (0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from alk.records import ExitCode
from alk.result.rule import PassRule

if TYPE_CHECKING:
    from alk.result.document import RunDocument


@dataclass(frozen=True, slots=True)
class Ruling:
    """The rule applied to a run: its exit code, the scenarios below the rule, and those it
    could not judge (nothing scored), each as (lane, scenario)."""

    code: ExitCode
    failing: tuple[tuple[str, str], ...]
    unscored: tuple[tuple[str, str], ...]


def judge(documents: Sequence[RunDocument], rule: PassRule | None = None) -> Ruling:
    """FAIL when a scenario breaks the rule; else VOID when anything could not be scored (a
    void repeat, an unscored scenario, a run that never got to its repeats); else PASS. `rule`:
    each document's own when None."""
    failing: list[tuple[str, str]] = []
    unscored: list[tuple[str, str]] = []
    void = not documents
    for document in documents:
        applied = rule or document.settings.rule
        if not document.scenarios or document.aggregate.counts.void:
            void = True
        for scenario in document.scenarios:
            held = applied.holds(scenario)
            if held is None:
                unscored.append((document.lane.name, scenario.id))
            elif not held:
                failing.append((document.lane.name, scenario.id))
    if failing:
        code = ExitCode.FAIL
    elif void or unscored:
        code = ExitCode.VOID
    else:
        code = ExitCode.PASS
    return Ruling(code, tuple(failing), tuple(unscored))


def exit_code(document: RunDocument) -> ExitCode:
    """The exit code by the run's own rule (`alk.result.rule`): by default FAIL when a scenario
    failed or was flaky; else VOID when anything could not be scored (a void repeat, a void
    scenario, a void run), so that 19 void repeats beside one pass are never read as green;
    else PASS."""
    return judge([document]).code
