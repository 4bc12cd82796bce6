"""The run report on a terminal, as rich renderables: `run` puts it together (header, the
scenario `table`, the `notes` under it, `why` each scenario did not pass, where the files are),
from the pieces in `cells`. Nothing here prints or creates a `Console`; the CLI owns the console
and prints what these return.
"""
