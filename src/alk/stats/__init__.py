"""The reliability statistics of a run, pure: repeat results in, statistics records out.

- `summary`: each scenario's and the lane's statistics (`records`: as result.json holds them);
- `pass_k`: pass^k and pass@k; `icc`: how alike a scenario's repeats are, and the design effect;
- `consistency`: how alike the repeats are in outcome and resources, and a lane's mean;
  `trajectories`: in tool use and steps, within budgets (`distances`: Jensen-Shannon and
  Levenshtein); `robustness`: what injected faults cost; `bootstrap`: the intervals' engine;
- `divergence`: where a scenario's repeats part ways;
- `two_runs`: two samples compared (`alk compare`).

Wilson's interval and the F quantile every statistic here uses are `alk.estimate`'s, on the
shared bottom with the `Estimate` the records hold.
"""
