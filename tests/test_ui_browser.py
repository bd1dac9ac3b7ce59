"""``tiermem ui`` in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromium-driver (`.ci/run` installs both, so CI never skips).

A real server (uvicorn in a thread on a free loopback port, the app ``tiermem ui`` serves) over
the store of tests/ui_helpers.py; one browser session for the module. The test loads each page
(a screenshot of each goes under a temporary directory; the paths are printed), checks the
hostile ``<script>`` texts show as text and never run, edits a fact, rolls back a version and
retries the dead queue item, each through the page's own form, and checks the store after each.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import QUEUED_FACT, SCRIPT, seeded

from tiermem import Memory
from tiermem.storage.outbox import OutboxRepository
from tiermem.testing import FakeClock
from tiermem.ui.guard import ui_options
from tiermem.ui.server import make_server, url_of

pytestmark = pytest.mark.usefixtures("backend")

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
PAGES = ("core", "journal", "facts", "prompt", "queue", "calls")


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if shutil.which(CHROMIUM) is None or shutil.which(DRIVER) is None:
        return f"no browser: {CHROMIUM} and {DRIVER} are needed (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
                 "--disable-dev-shm-usage", "--window-size=1280,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(mem: Memory) -> Iterator[str]:
    """``tiermem ui``'s server for ``mem`` in a thread; yields its URL."""
    options = ui_options(_free_port())
    server = make_server(mem, options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield url_of(options).rstrip("/")
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _submit(driver: Any, xpath: str) -> str:
    """Click the form's button and wait for the page it leads to: the flash message's text (a click
    returns before the POST, its redirect and the next page have loaded)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.find_element(By.XPATH, xpath).click()
    flash = WebDriverWait(driver, 60).until(
        expected_conditions.presence_of_element_located((By.CLASS_NAME, "flash")))
    return str(flash.text)


def test_every_page_and_the_three_changes_in_a_real_browser(browser: Any, root: Path, clock: FakeClock,
                                                            tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    mem, _llm, _dead = seeded(root, clock)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        with serving(mem) as url:
            for name in PAGES:
                browser.get(f"{url}/{name}")
                assert browser.find_element(By.TAG_NAME, "h1").text
                with pytest.raises(NoAlertPresentException):
                    _ = browser.switch_to.alert.text  # the stored <script> never ran
                path = shots / f"{name}.png"
                assert browser.save_screenshot(str(path)) and path.stat().st_size > 1000
                print(f"screenshot: {path}")
            browser.get(f"{url}/core")
            assert SCRIPT in browser.find_element(By.TAG_NAME, "main").text  # shown as text

            # edit a fact through its form
            fact = next(f for f in mem.facts.list() if f.content.startswith("Works on"))
            browser.get(f"{url}/facts")
            form = f"//form[@class='edit'][input[@name='id' and @value='{fact.id}']]"
            box = browser.find_element(By.XPATH, f"{form}/textarea")
            box.clear()
            box.send_keys("Works on query planners")
            assert f"saved fact {fact.id}" in _submit(browser, f"{form}/button")
            assert mem.facts.get(fact.id).content == "Works on query planners"

            # roll back to the version the hand edit replaced
            dream_text = mem.dream_versions()[0].content
            version = mem.dream_versions()[0].id
            browser.get(f"{url}/core")
            rollback = f"//button[text()='Roll back to version {version}']"
            assert f"restored version {version}" in _submit(browser, rollback)
            assert mem.core.read() == dream_text

            # retry the dead queue item
            browser.get(f"{url}/queue")
            retry = "//button[starts-with(text(), 'Retry dead-letter items')]"
            assert "retried 1 dead item(s)" in _submit(browser, retry)
            assert OutboxRepository(mem.db).counts() == {}
            assert QUEUED_FACT in [f.content for f in mem.facts.list()]
    finally:
        mem.close()
