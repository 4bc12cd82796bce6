"""Walking a plan: the probe, then every repeat not yet done, on an engine.

- `executor`: what runs and in what order; why a run is void;
- `adaptive`: `--repeats auto`, round by round until each scenario is settled;
- `repeat`: one repeat from a fresh workspace to its `RepeatResult`, and what a lane's
  repeats share (`LaneContext`);
- `engine`: the seam where repeats run, with `threads` (`-j N`) and `dask` (a cluster).
"""
