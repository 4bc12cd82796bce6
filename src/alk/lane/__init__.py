"""Lanes: a lane file found (`find`), read and validated into a `Lane` (`load`, with its
scenarios in `scenario` and the typed table access both use in `table`).
"""
