"""Walking a plan: the probe, then every repeat not yet done, on an engine.

- `executor`: what runs and in what order; why a run is void;
- `adaptive`: `--repeats auto`, round by round until each scenario is settled;
- `repeat`: one repeat from a fresh workspace to its `RepeatResult`, and what a lane's
  repeats share (`LaneContext`), with `attempts` (a killed and resumed repeat's attempts as
  one) and `slots` (how many workers start at once);
- `engine`: the seam where repeats run, with `threads` (`-j N`) and `dask` (a cluster, the
  tasks it runs in `dask_tasks`).
"""
