"""Lanes: a lane file found (`find`), read and validated into a `Lane` (`load`, with its
scenarios in `scenario`, those of a scenario file it shares with other lanes merged in by
`include`, and the typed table access all use in `table`).
"""
