"""The run's token budget (`[model] max_tokens.run`): once the provider tokens of the repeats
this invocation ran reach it, no new repeat starts. Repeats already running finish (the budget
can be overshot by up to -j repeats' worth, more on a Dask cluster's window); the run then ends
as a partial result, as an interrupted one does, which `alk run --resume` goes on with, with a
budget of its own.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from alk.cost import repeat_tokens
from alk.layout import group_of
from alk.records import Plan, RepeatResult, RepeatSpec


class RunBudget:
    """Counts the provider tokens of the repeats that finish; `gate` hands out repeats to run
    only while the budget lasts."""

    def __init__(self, plan: Plan) -> None:
        model = plan.lane.model
        budget = model.max_tokens if model is not None else None
        self.limit = budget.run if budget is not None else None
        self.planned = len(plan.items)
        self.run_id = group_of(plan.run_id)  # a lane of several resumes with its run
        self.spent = 0
        self.held_back = 0  # repeats the gate did not hand out

    def add(self, result: RepeatResult) -> None:
        self.spent += repeat_tokens(result.model)

    @property
    def reached(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def gate(self, items: Sequence[RepeatSpec]) -> Sequence[RepeatSpec]:
        return items if self.limit is None else _Gated(items, self)

    def why(self, finished: int) -> str | None:
        """What the result says when the budget held repeats back; None when it did not."""
        if not self.held_back:
            return None
        return (f"stopped: token budget reached ({self.spent:,} of max_tokens.run = "
                f"{self.limit:,} provider tokens) after {finished} of {self.planned} repeats; "
                f"raise max_tokens.run, or resume (alk run --resume {self.run_id}) for "
                f"another {self.limit:,}")


class _Gated(Sequence[RepeatSpec]):
    """The repeats to run, handed out (iterated) only while the budget lasts: the engines take
    their next repeat from an iterator, the threads' one at a time, Dask's a window ahead.
    `counted_first`: a thread takes its next repeat once its last one is counted."""

    counted_first = True

    def __init__(self, items: Sequence[RepeatSpec], budget: RunBudget) -> None:
        self.items, self.budget = items, budget

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):  # type: ignore[override]
        return self.items[index]

    def __iter__(self) -> Iterator[RepeatSpec]:
        for index, item in enumerate(self.items):
            if self.budget.reached:
                self.budget.held_back += len(self.items) - index
                return
            yield item
