"""A real headless browser for the dashboard's tests: Debian's Chromium and chromedriver,
driven by Selenium. .ci/run installs them; a developer without them gets a skip that says so,
CI (``CI`` set) a failure, so that a missing browser never passes as green.

Screenshots taken by :func:`screenshot` are written under the test's tmp dir and copied to
``build/screenshots/`` at the repository's root, for people to look at (docs/dashboard.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
# The flags Chromium needs on a closed network as root: no sandbox (root), no GPU, and none of
# its own connections to the outside (refused here, and slow to fail).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1600", "--hide-scrollbars")


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}: CI must run the browser tests (.ci/run installs chromium and chromium-driver)")
    pytest.skip(f"{why}: apt-get install chromium chromium-driver (and pip install -e '.[test]') to run them")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium of the module's own, with a fresh profile."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        _unavailable(f"no {CHROMIUM} or {CHROMEDRIVER}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed")
    profile = tempfile.mkdtemp(prefix="clueue-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: Any, directory: Path, name: str) -> Path:
    """The whole page as ``name``.png in ``directory``, copied to build/screenshots/."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(600, min(int(height) + 40, 6000)))
    path = directory / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot of {name}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENSHOTS / path.name)
    return path
