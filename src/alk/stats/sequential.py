"""The sequential regression gate (`alk compare A B --until-decided`): look at the two runs,
run more repeats of the scenarios not yet decided, look again, until each is decided or the
maximum is reached, with error control that holds under the repeated looks.

The design is group-sequential with α spending (Lan & DeMets 1983), the spending function of
O'Brien–Fleming's type, one-sided:

    α(t) = 2 − 2·Φ(z₁₋α/₂ / √t),   t = the repeats a run at this look ÷ the maximum,

so that α(1) = α and almost nothing is spent at the first looks, which are the smallest. Look j
spends α(t_j) − α(t_{j−1}); the boundary at each look is that increment, split evenly over
the m compared scenarios (Bonferroni over looks and scenarios: valid whatever the correlation
between looks, conservative). A scenario regresses at the first look where its one-sided
Fisher p (B worse) is at most its share; the family-wise chance of a false regression over
all looks is then at most Σ α-increments = α. Improvements are a family of their own, the same
way. "Unchanged" is an equivalence decision per scenario: the Newcombe interval at confidence
1 − 2·(that look's increment of α's spending) lies within ±δ, and no repeat of either run is
void; its error over the looks is at most α per scenario.

Two things of the fixed gate are left out, on purpose. Holm–Tarone's count of the scenarios
that can reach significance is a statement given every table's margins at one look; once a
scenario's stopping depends on its earlier looks, its later table is no longer hypergeometric
given its margins, so the count is not kept across looks and every compared scenario gets its
share. The lane's stratified test sums scenarios that stopped at different looks, for the same
reason, and is not a member here.

Every look is counted, the first (the saved runs as they are) included: `Ledger` keeps how many
were taken and the α each family spent, the bookkeeping the comparison prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from alk.estimate import Estimate, wilson_bounds
from alk.stats.gate import Counts, fisher_greater, fisher_less
from alk.stats.gate_rule import Change

_NORMAL = NormalDist()


def spent(alpha: float, t: float) -> float:
    """α(t) of O'Brien–Fleming's type (Lan & DeMets 1983), one-sided: 0 at t = 0, α at t >= 1."""
    if t <= 0:
        return 0.0
    if t >= 1:
        return alpha
    return 2.0 * (1.0 - _NORMAL.cdf(_NORMAL.inv_cdf(1 - alpha / 2) / math.sqrt(t)))


@dataclass(frozen=True, slots=True)
class Design:
    """What the looks are, fixed before the first one: α, the margin δ, the repeats a run
    at the first look (the saved runs') and at most, and the repeats a round adds."""

    alpha: float
    margin: float
    first: int
    max_repeats: int
    round_size: int
    scenarios: int  # m, the compared scenarios: each gets 1/m of a look's increment

    def __post_init__(self) -> None:
        if not (0 < self.alpha < 1 and 0 < self.margin < 1):
            raise ValueError(f"α and δ are rates in (0, 1), got {self.alpha} and {self.margin}")
        if self.round_size < 1 or self.scenarios < 1 or self.first < 1:
            raise ValueError("a design needs a round of 1 repeat or more, a first look of 1 "
                             "repeat or more and 1 scenario or more")

    def looks(self) -> tuple[int, ...]:
        """The repeats a run at each look: the first, then a round more, up to the maximum."""
        if self.first >= self.max_repeats:
            return (self.first,)
        points = list(range(self.first, self.max_repeats, self.round_size))
        return (*points, self.max_repeats)

    def increment(self, look: int) -> float:
        """α spent at look `look` (0-based), for a whole family."""
        points = self.looks()
        end = self.max_repeats if self.first < self.max_repeats else self.first
        before = spent(self.alpha, points[look - 1] / end) if look else 0.0
        return spent(self.alpha, points[look] / end) - before

    def boundary(self, look: int) -> float:
        """One scenario's share of look `look`'s increment: its one-sided p must be at most
        this to be decided regressed (or improved)."""
        return self.increment(look) / self.scenarios


@dataclass(frozen=True, slots=True)
class Decision:
    change: Change  # INCONCLUSIVE: not decided yet
    look: int | None  # 0-based look it was decided at
    reason: str


@dataclass(frozen=True, slots=True)
class Ledger:
    """Where the looks stand: decisions so far, looks taken, α each family spent."""

    design: Design
    decisions: tuple[Decision, ...]
    looks_taken: int
    spent: float  # α spent so far by each family (both spend alike)

    def open(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self.decisions) if d.change is Change.INCONCLUSIVE)

    @property
    def finished(self) -> bool:
        return not self.open() or self.looks_taken >= len(self.design.looks())


def start(design: Design) -> Ledger:
    return Ledger(design, tuple(Decision(Change.INCONCLUSIVE, None, "not looked at yet")
                                for _ in range(design.scenarios)), 0, 0.0)


def look(ledger: Ledger, tables: Sequence[Counts | None], voids: Sequence[int]) -> Ledger:
    """The next look, at each open scenario's table (None: no scored repeat in one run) and
    its void repeats in both runs; decided scenarios keep their decision."""
    design, j = ledger.design, ledger.looks_taken
    if j >= len(design.looks()):
        raise ValueError(f"every look of the design is taken ({j})")
    if len(tables) != design.scenarios or len(voids) != design.scenarios:
        raise ValueError(f"{design.scenarios} scenarios in the design, {len(tables)} tables")
    boundary, increment = design.boundary(j), design.increment(j)
    decisions = list(ledger.decisions)
    for i in ledger.open():
        table = tables[i]
        if table is not None:
            decisions[i] = _decide(table, voids[i], boundary, increment, j, design.margin)
    return Ledger(design, tuple(decisions), j + 1, ledger.spent + increment)


def _decide(table: Counts, void: int, boundary: float, increment: float, j: int,
            margin: float) -> Decision:
    worse, better = fisher_less(*table), fisher_greater(*table)
    if worse <= boundary:
        return Decision(Change.REGRESSED, j, f"B worse at look {j + 1}: one-sided p "
                        f"{worse:.2g} <= {boundary:.2g}")
    if better <= boundary:
        return Decision(Change.IMPROVED, j, f"B better at look {j + 1}: one-sided p "
                        f"{better:.2g} <= {boundary:.2g}")
    if not void and increment > 0:
        interval = newcombe_at(*table, z=_NORMAL.inv_cdf(1 - increment))
        if -margin <= interval.low and interval.high <= margin:
            return Decision(Change.UNCHANGED, j, f"within ±{margin * 100:g} points at look "
                            f"{j + 1}: interval [{interval.low * 100:+.0f}, "
                            f"{interval.high * 100:+.0f}] at {1 - 2 * increment:.4g}")
    return Decision(Change.INCONCLUSIVE, None, f"not decided by look {j + 1}")


def newcombe_at(passed_a: int, n_a: int, passed_b: int, n_b: int, *, z: float) -> Estimate:
    """B − A with Newcombe's hybrid score interval (Newcombe 1998, method 10) at normal
    quantile z: each rate's Wilson interval at z, combined."""
    rate_a, rate_b = passed_a / n_a, passed_b / n_b
    low_a, high_a = wilson_bounds(rate_a, n_a, z)
    low_b, high_b = wilson_bounds(rate_b, n_b, z)
    difference = rate_b - rate_a
    low = difference - math.hypot(rate_b - low_b, high_a - rate_a)
    high = difference + math.hypot(high_b - rate_b, rate_a - low_a)
    return Estimate(difference, max(-1.0, low), min(1.0, high))
