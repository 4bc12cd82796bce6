"""The HTML report: one self-contained page per run (`run_page`) and per comparison
(`compare_page`), made by `page` from the templates beside it, with Plotly charts (`charts`,
drawn from `figure`, `rate_charts` and `spread_charts`) and bounded views of the transcripts
(`excerpts`). A page opens from disk with no network.
"""
