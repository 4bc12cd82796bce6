"""alk, the agent lane kit.

Kept free of imports on purpose: `alk.worker` must load in a worker's interpreter without
typer, rich or numpy. The Python API lives in `alk.api`.
"""

__version__ = "0.1.0"
