"""The browser the HTML report's tests drive: Debian's Chromium through Playwright (never a
browser Playwright would download), one for the module.

Where either is missing the tests skip and say which, unless ALK_REQUIRE_BROWSER=1 (CI sets
it): then a missing browser fails them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# No sandbox: the tests may run as root in a container; the rest keeps Chromium off the network
# it would otherwise reach on its own (updates, sync), so that every request is the page's.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _missing() -> str | None:
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is not installed (Debian: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    reason = _missing()
    if reason is not None:
        if os.environ.get("ALK_REQUIRE_BROWSER") == "1":
            pytest.fail(f"ALK_REQUIRE_BROWSER=1, but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
