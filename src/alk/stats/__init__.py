"""The reliability statistics of a run, pure: repeat results in, statistics records out.

- `summary`: each scenario's and the lane's statistics as the result record keeps them;
- `consistency`: how alike a scenario's repeats are (outcomes, tools, steps, resources);
- `divergence`: where a scenario's repeats part ways.
"""
