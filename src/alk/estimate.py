"""A number with its interval: what every reliability statistic alk reports is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate and its 95% interval [low, high]. How the interval was made (Wilson,
    F-based, a seeded bootstrap) is the statistic's, and the README says it for each."""

    value: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if not self.low <= self.value <= self.high:
            raise ValueError(f"an estimate needs low <= value <= high, got {self.low}, "
                             f"{self.value}, {self.high}")
