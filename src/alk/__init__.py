"""alk, the agent lane kit.

Kept free of imports on purpose: `alk.worker` must load in a worker's interpreter without
typer, rich or numpy. The Python API lives in `alk.api`.
"""

__version__ = "0.1.0"


def installed_version() -> str:
    """alk's version as its package metadata says (what pip installed, what `alk --version`
    and `alk doctor` print); `__version__` where alk runs from a source tree never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("alk")
    except PackageNotFoundError:
        return __version__
