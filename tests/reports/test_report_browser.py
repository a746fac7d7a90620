"""report.html in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``, which
``.ci/run`` installs) driven by selenium opens the demo audit's report and checks that it loads with no
console error and no network request, that every section and image is there and rendered, and that a
leaderboard sorts; it keeps a full-page screenshot (``test-artifacts/report.png``, or the folder
``ROUTERLAB_TEST_ARTIFACTS`` names). Missing browser: skipped locally, a failure when ``CI`` is set."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from routerlab.data.demo import demo
from routerlab.reports.audit import run_audit

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"^\s*[+\-\u2212]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][+\-]?\d+)?")


def _browser_missing() -> str:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists() and shutil.which(Path(p).name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    return ", ".join(missing)


def _artifacts() -> Path:
    folder = Path(os.environ.get("ROUTERLAB_TEST_ARTIFACTS") or REPO / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick audit of the demo, written by the public API: its out directory."""
    out = tmp_path_factory.mktemp("audit") / "out"
    run_audit(demo(), out, options={"quick": True})
    assert (out / "report.html").is_file(), "run_audit wrote no report.html"
    return out


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser test, but {missing} is missing (.ci/run installs chromium)")
        pytest.skip(f"no headless browser here: {missing} missing (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--hide-scrollbars"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver") or CHROMEDRIVER), options=opts)
    d.set_page_load_timeout(30)
    try:
        yield d
    finally:
        d.quit()


def _requests(driver: Any) -> list[str]:
    """Every URL the page asked for, from Chromium's performance (DevTools) log."""
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def _column(driver: Any, table: Any, col: int) -> list[float]:
    cells = driver.execute_script(
        "return Array.from(arguments[0].tBodies[0].rows, r => r.cells[arguments[1]].textContent.trim());", table, col)
    return [float(m.group(0).replace(",", "").replace("\u2212", "-")) for c in cells if (m := NUMBER.match(c))]


@pytest.mark.slow  # a quick demo audit (~10 s) and a browser (~5 s)
def test_report_opens_renders_and_sorts_in_chromium(report: Path, driver: Any) -> None:
    from selenium.webdriver.common.by import By

    page = report / "report.html"
    driver.get(page.as_uri())
    assert driver.execute_script("return document.readyState") == "complete"

    # no console error (CSP violations, script errors, failed loads all log SEVERE)
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    # no network request: only the file itself (and data:/about: URLs)
    foreign = [u for u in _requests(driver) if unquote(u) != unquote(page.as_uri())
               and not u.startswith(("data:", "about:"))]
    assert not foreign, foreign

    # every section of the report is a heading on the page
    md_titles = re.findall(r"^## (.+)$", (report / "report.md").read_text(encoding="utf-8"), re.M)
    h2 = [e.text.rstrip("#").strip() for e in driver.find_elements(By.CSS_SELECTOR, "main h2")]
    assert md_titles and h2 == md_titles
    record = json.loads((report / "results.json").read_text(encoding="utf-8"))
    for name in record["sections"]:
        assert driver.find_elements(By.ID, name), f"no anchor for section {name!r}"

    # nothing is wider than the window: wide tables scroll inside their own box
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")

    # every finding links to its table or figure, and no link inside the page is dead
    findings = driver.find_elements(By.CSS_SELECTOR, "#findings ol.findings > li")
    assert len(findings) == len(record["findings"]) > 0
    assert all(f.find_elements(By.CSS_SELECTOR, "a.see") for f in findings), "a finding without a working link"
    dead = driver.execute_script("return Array.from(document.querySelectorAll('a[href^=\"#\"]'), "
                                 "a => a.getAttribute('href').slice(1)).filter(id => !document.getElementById(id));")
    assert not dead, dead

    # every image is decoded and drawn
    imgs = driver.find_elements(By.TAG_NAME, "img")
    figures = [f for s in record["sections"].values() for f in s.get("figures", [])]
    assert len(imgs) >= len(figures) > 0
    for img in imgs:
        assert img.get_attribute("src").startswith("data:image/")
        assert driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img), \
            img.get_attribute("alt")
        assert img.size["width"] > 0 and img.size["height"] > 0

    # the leaderboard sorts by mu_o, one way then the other
    table = driver.find_element(By.CSS_SELECTOR, "#leaderboard table.sortable")
    heads = table.find_elements(By.CSS_SELECTOR, "thead th")
    col = next(i for i, h in enumerate(heads) if h.text.startswith("mu_o"))
    link = heads[col].find_element(By.CSS_SELECTOR, "a.term")  # the metric's name opens its glossary entry
    assert link.get_attribute("href").endswith("#term-mu_o") and driver.find_elements(By.ID, "term-mu_o")
    before = _column(driver, table, col)
    assert len(before) >= 3
    heads[col].find_element(By.CSS_SELECTOR, "button.sort").click()
    first = heads[col].get_attribute("aria-sort")
    after = _column(driver, table, col)
    assert first in ("ascending", "descending")
    assert after == sorted(before, reverse=first == "descending")
    heads[col].find_element(By.CSS_SELECTOR, "button.sort").click()
    second = heads[col].get_attribute("aria-sort")
    assert {first, second} == {"ascending", "descending"}
    assert _column(driver, table, col) == sorted(before, reverse=second == "descending")
    assert sorted(before) != before or sorted(before, reverse=True) != before  # the two orders differ
    heads[0].click()  # a text column sorts by name
    names = driver.execute_script("return Array.from(arguments[0].tBodies[0].rows, r => r.cells[0].textContent);",
                                  table)
    assert names == sorted(names, key=str.casefold, reverse=heads[0].get_attribute("aria-sort") == "descending")
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]

    # a full-page screenshot for people to look at
    driver.execute_script("window.scrollTo(0, 0)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 100, 16000))
    shot = _artifacts() / "report.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
