"""The page of `alk compare A B`: each scenario's change, B − A, with the rule that named it, and
the two runs side by side.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alk.compare import Change, Comparison, RunSide, ScenarioComparison, Side
from alk.estimate import Estimate
from alk.layout import HTML_NAME, report_folder
from alk.report.html.page import percent, render
from alk.report.safe_text import DASH, inline, plural, printable

_CHANGES = {Change.REGRESSED: ("▼", "fail"), Change.IMPROVED: ("▲", "pass"),
            Change.UNCHANGED: ("=", "same"), Change.INCONCLUSIVE: ("?", "flaky")}


def compare_page(comparison: Comparison, out_dir: Path) -> str:
    """`alk compare A B` as one HTML page: each scenario's change with both rates and their
    intervals, the difference, its one-sided p and the level it was held to, the rule that
    named the change, the notes."""
    comparison = printable(comparison)
    symbol, tone = _CHANGES[comparison.change]
    # The one-sided p of the way B moved, and the level it was held to.
    rows = [{"id": s.id, "a": _side(s.a), "b": _side(s.b),
             "difference": _difference(s.difference),
             "p": _p(s.p_better if _up(s) else s.p),
             "p_holm": _p(s.level_better if _up(s) else s.level),
             "change": {"symbol": _CHANGES[s.change][0], "tone": _CHANGES[s.change][1],
                        "word": s.change.value},
             "reason": s.reason,
             "settle": s.repeats_to_settle}
            for s in comparison.scenarios]
    # The page sits in B's report folder; each run's own page is linked where it was written.
    here = report_folder(out_dir, comparison.b.run_id)
    context = {
        "title": f"alk compare · {comparison.a.run_id} → {comparison.b.run_id}",
        "a": _run_side(comparison.a, out_dir, here), "b": _run_side(comparison.b, out_dir, here),
        "change": {"symbol": symbol, "tone": tone, "word": comparison.change.value},
        "counts": ", ".join(f"{n} {c.value}" for c in Change if (n := comparison.count(c))),
        "rows": rows,
        "pooled": {"a": _side(comparison.pooled_a), "b": _side(comparison.pooled_b),
                   "difference": _difference(comparison.pooled_difference),
                   "p": _p(comparison.pooled_p)},
        "rule": _compare_rule(comparison),
        "notes": list(comparison.notes),
        "only_a": list(comparison.only_a), "only_b": list(comparison.only_b),
    }
    return render("compare.html.j2", context)


def _up(scenario: ScenarioComparison) -> bool:
    return scenario.difference is not None and scenario.difference.value > 0


def _compare_rule(comparison: Comparison) -> list[str]:
    alpha, margin = f"{comparison.alpha:g}", f"±{comparison.margin * 100:g} points"
    return [f"regressed (▼): Fisher's exact test, one-sided (B passes less often), rejects "
            f"by Holm–Tarone's step-down at family-wise level {alpha} over the compared "
            "scenarios and the lane's exact stratified test; a scenario whose counts cannot "
            "reach significance spends no α. The run regressed when a scenario did, or when "
            "the lane test alone says B is worse",
            f"improved (▲): the same, one-sided the other way, in a family of its own at {alpha}",
            f"unchanged (=): neither, no void repeat in either run, and the 95% Newcombe "
            f"interval of B − A lies within {margin}",
            "inconclusive (?): anything else; its reason says the smallest drop its test sees "
            "80% of the time at its repeats (a smaller one could go unseen)",
            *_looks_rule(comparison)]


def _looks_rule(comparison: Comparison) -> list[str]:
    looks = comparison.sequence
    if looks is None:
        return []
    return [f"until decided: {looks.taken} of {looks.planned} looks, from {looks.first} repeats "
            f"a run in rounds of {looks.round_size} (at most {looks.max_repeats}); at each "
            "look a scenario is decided when its one-sided p is within that look's increment "
            "of α (O'Brien–Fleming-type spending) divided by the scenarios; "
            f"α spent {looks.alpha_spent:.3g} by each family; {looks.added_a} repeats more in A, "
            f"{looks.added_b} in B. These decisions replace the rules above"]


def _run_side(side: RunSide, out_dir: Path, here: Path) -> dict[str, Any]:
    page = report_folder(out_dir, side.run_id) / HTML_NAME
    return {"run_id": side.run_id, "lane": side.lane,
            "page": Path(os.path.relpath(page, here)).as_posix() if page.is_file() else None,
            "framework": f"{inline(side.framework or DASH)} "
                         f"{inline(side.version or '(no version)')}",
            "repeats": plural(side.repeats, "repeat"), "status": side.status,
            "seed": side.seed}


def _side(side: Side) -> dict[str, Any]:
    return {"rate": percent(side.rate) if side.scored else "void",
            "tally": f"{side.passed}/{side.scored}",
            "void": (f"void {percent(side.void_rate)} ({side.void} of {side.completed})"
                     if side.void else None)}


def _difference(estimate: Estimate | None) -> str:
    if estimate is None:
        return DASH
    return (f"{_signed(estimate.value * 100)} [{_signed(estimate.low * 100)}, "
            f"{_signed(estimate.high * 100)}]")


def _signed(points: float) -> str:
    shown = f"{points:.0f}"
    if float(shown) == 0:
        return "0"
    return shown.replace("-", "−") if points < 0 else "+" + shown


def _p(p: float | None) -> str:
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"
