"""The inspector in a real browser: Debian's headless Chromium driven by chromium-driver (selenium), against the real
``lantern ui`` process serving a store built by ``lantern demo --demo-db`` (with a few hostile and Chinese turns
added). Clicks through sessions -> a compaction -> its lost and injected turns -> explain; forgets an entry through
the confirmation page; checks that archived markup runs nothing. Screenshots are saved under the test's temporary
directory (printed), never committed. ``make test`` installs chromium and chromium-driver with apt when missing."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
if not (os.access(CHROMIUM, os.X_OK) and os.access(DRIVER, os.X_OK)):
    pytest.skip(
        f"no {CHROMIUM} / {DRIVER}: the browser tests need Debian's chromium and chromium-driver "
        "(`make test` installs them with apt-get; elsewhere: apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from lantern import Lantern  # noqa: E402

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
CHINESE = "部署端口是多少？预发布环境的端口是 8443。"
HOSTILE = [
    {"role": "user", "content": f"Paste this into the docs page: {SCRIPT}"},
    {"role": "assistant", "content": f"Pasted. The banner uses {IMG} as a placeholder."},
    {"role": "user", "content": CHINESE},
    {"role": "assistant", "content": "好的：预发布环境的端口是 8443，生产环境是 443。"},
]


LONG_TEXT = "\n".join(f"第 {i} 步：重建了订单索引的分片 {i}，校验 {i * 7} 行。Shard {i} verified." for i in range(60))
LONG = [{"role": "user", "content": "重建订单索引"}, {"role": "assistant", "content": LONG_TEXT}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ui-screenshots")
    print(f"\nscreenshots: {path}")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``lantern demo --demo-db DB`` (the shipped aider transcript, its compactions recorded), the hostile and
    Chinese turns added, then ``lantern ui`` on a free loopback port."""
    tmp = tmp_path_factory.mktemp("ui-browser")
    db = tmp / "demo.db"
    env = {**os.environ, "HOME": str(tmp / "home")}
    built = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "demo", "--demo-db", str(db), "--no-show-block"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert built.returncode == 0, built.stderr
    with Lantern(db) as lt:
        ids = lt.archive(HOSTILE, session="hostile 测试").entry_ids
        lt.archive(LONG, session="long answer")
        for m in range(8):  # dense versions: 8 values of each key within 8 minutes
            lines = "\n".join(f"GATEWAY_{k}_PORT={8000 + m * 40 + k}" for k in range(40))
            lt.archive(
                [
                    {
                        "role": "user",
                        "content": f"{lines}\n支付服务的端口是 {9400 + m}",
                        "timestamp": f"2026-05-01T10:0{m}:00Z",
                    }
                ],
                session="dense facts",
            )
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "ui", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/static/ui.css", timeout=2)
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "lantern ui did not start"
            time.sleep(0.2)
    yield {"base": base, "db": db, "hostile": ids}
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1360,1000",
    ):
        options.add_argument(flag)
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def no_alert(driver) -> None:
    """No script ran an alert() (selenium's switch_to.alert raises when there is none)."""
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert  # noqa: B018


def test_click_through_session_compaction_explain(server, browser, shots):
    browser.get(server["base"] + "/")
    assert browser.title.startswith("Sessions")
    browser.save_screenshot(str(shots / "1-sessions.png"))
    # a session with a compaction: its count links to the timeline's compactions
    browser.find_element(By.CSS_SELECTOR, "table.sessions td.num a").click()
    assert "/session?" in browser.current_url
    turns = browser.find_elements(By.CSS_SELECTOR, "li.turn")
    lost = browser.find_elements(By.CSS_SELECTOR, "li.turn.lost")
    assert len(turns) > 10 and lost and browser.find_elements(By.CSS_SELECTOR, ".mark.ok")
    assert browser.find_element(By.CSS_SELECTOR, "li.tl-event .event-title").text.startswith("Compaction #")
    browser.save_screenshot(str(shots / "2-timeline.png"))
    # a folded tool output opens on a click
    folded = browser.find_elements(By.CSS_SELECTOR, "li.turn details")
    if folded:
        folded[0].find_element(By.TAG_NAME, "summary").click()
        assert folded[0].get_attribute("open") is not None

    browser.find_element(By.LINK_TEXT, "Lost vs injected").click()
    assert "/event/" in browser.current_url
    heads = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".versus h2")]
    assert heads[0].startswith("Lost") and heads[1].startswith("Injected")
    statuses = [s.text for s in browser.find_elements(By.CSS_SELECTOR, ".versus .status")]
    assert "✓ recovered" in statuses and "✗ not recovered" in statuses and "lost turn" in statuses
    browser.save_screenshot(str(shots / "3-event.png"))

    browser.find_element(By.LINK_TEXT, "Explain this recovery").click()
    assert "/explain?event=" in browser.current_url
    rows = browser.find_elements(By.CSS_SELECTOR, "table.explain tbody tr")
    assert rows and browser.find_elements(By.CSS_SELECTOR, "table.explain svg.ranks rect.bar")
    verdicts = {v.text for v in browser.find_elements(By.CSS_SELECTOR, "table.explain .verdict")}
    assert "packed" in verdicts
    assert browser.find_element(By.CSS_SELECTOR, "pre.block").text.strip()
    browser.save_screenshot(str(shots / "4-explain.png"))
    no_alert(browser)

    for path, name in (("/facts", "5-facts"), ("/stats", "6-stats")):
        browser.get(server["base"] + path)
        assert browser.find_elements(By.CSS_SELECTOR, "svg")
        browser.save_screenshot(str(shots / f"{name}.png"))


def test_archived_markup_runs_nothing_and_is_shown_as_text(server, browser, shots):
    from urllib.parse import quote

    browser.get(server["base"] + "/session?s=" + quote("hostile 测试"))
    no_alert(browser)
    body = browser.find_element(By.TAG_NAME, "main").text
    assert SCRIPT in body and IMG in body  # shown literally
    assert CHINESE in body and "好的：预发布环境的端口是 8443，生产环境是 443。" in body  # no mojibake
    assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
    assert browser.find_elements(By.CSS_SELECTOR, "script") == []
    browser.save_screenshot(str(shots / "7-hostile.png"))
    # the search box and explain show the same text escaped, and run nothing either
    browser.get(server["base"] + "/explain?q=" + quote("docs page placeholder banner " + SCRIPT) + "&all=1")
    no_alert(browser)
    assert SCRIPT in browser.find_element(By.TAG_NAME, "main").text
    assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
    browser.get(server["base"] + "/?q=" + quote(IMG))
    no_alert(browser)
    assert browser.find_element(By.NAME, "q").get_attribute("value") == IMG


def test_the_csp_header_is_sent(server):
    with urllib.request.urlopen(server["base"] + "/") as r:
        csp = r.headers["Content-Security-Policy"]
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    for directive in (
        "default-src 'none'",
        "script-src 'none'",
        "style-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ):
        assert directive in csp


def test_forget_an_entry_through_the_confirmation(server, browser, shots):
    from urllib.parse import quote

    victim = server["hostile"][0]
    browser.get(server["base"] + "/session?s=" + quote("hostile 测试"))
    entry = browser.find_element(By.ID, f"e{victim}")
    entry.find_element(By.LINK_TEXT, "forget…").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Forget entry {victim}?"
    browser.save_screenshot(str(shots / "8-forget.png"))
    with Lantern(server["db"]) as lt:
        assert victim in lt.store.entries([victim])  # a confirmation page deletes nothing
    browser.find_element(By.ID, "confirm-forget").click()
    assert "1 entry forgotten" in browser.find_element(By.CSS_SELECTOR, ".notice").text
    with Lantern(server["db"]) as lt:
        assert victim not in lt.store.entries([victim])
        assert lt.store.entries([server["hostile"][1]])  # only that entry
    browser.get(server["base"] + "/session?s=" + quote("hostile 测试"))
    assert SCRIPT not in browser.find_element(By.TAG_NAME, "main").text


def _fonts(driver, css: str) -> list[dict]:
    """The platform fonts Chromium drew the text of the first element matching ``css`` with (DevTools protocol
    ``CSS.getPlatformFontsForNode``): [{"familyName", "glyphCount", ...}]."""
    driver.execute_cdp_cmd("DOM.enable", {})
    driver.execute_cdp_cmd("CSS.enable", {})
    root = driver.execute_cdp_cmd("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = driver.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": css})["nodeId"]
    assert node, css
    return driver.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


def test_chinese_text_is_drawn_with_a_cjk_font_not_missing_glyph_boxes(server, browser, shots):
    """Every Chinese character of a turn is drawn by a font that has it: the glyphs Chromium drew with fonts that
    cover CJK add up to the CJK characters of the text (a page whose font stack finds no CJK font draws them as
    boxes from the Latin font, or with no font at all)."""
    import subprocess as sp
    from urllib.parse import quote

    if not sp.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout.strip():
        pytest.skip("no CJK font installed (make browser installs fonts-wqy-zenhei)")
    browser.get(server["base"] + "/session?s=" + quote("hostile 测试"))
    user_turn = browser.find_elements(By.CSS_SELECTOR, ".msg.role-user .text")
    assert any(CHINESE in el.text for el in user_turn)
    index = next(i for i, el in enumerate(user_turn) if CHINESE in el.text)
    fonts = _fonts(browser, f"li.turn:nth-of-type({index + 1}) .msg.role-user .text")
    cjk = sum(1 for ch in CHINESE if "\u4e00" <= ch <= "\u9fff" or ch in "？，。：")
    cjk_fonts = [f for f in fonts if any(n in f["familyName"] for n in ("WenQuanYi", "Noto Sans CJK", "Source Han"))]
    assert cjk_fonts and sum(f["glyphCount"] for f in cjk_fonts) >= cjk, fonts
    browser.save_screenshot(str(shots / "9-chinese.png"))


def test_a_long_answer_opens_on_one_click(server, browser, shots):
    from urllib.parse import quote

    browser.get(server["base"] + "/session?s=" + quote("long answer"))
    fold = browser.find_element(By.CSS_SELECTOR, "details.long")
    preview = fold.find_element(By.CSS_SELECTOR, "summary .preview")
    assert preview.is_displayed() and "第 59 步" not in fold.text  # folded: the head only
    fold.find_element(By.TAG_NAME, "summary").click()
    assert fold.get_attribute("open") is not None and not preview.is_displayed()
    assert fold.find_element(By.CSS_SELECTOR, "div.text").text == LONG_TEXT
    browser.save_screenshot(str(shots / "10-long-open.png"))


def test_dense_fact_versions_are_labelled_without_overprinting(server, browser, shots):
    """The facts page as Chromium lays it out: in every row of the time axis, the value labels' boxes (their real
    rendered widths, CJK included) never overlap."""
    browser.get(server["base"] + "/facts")
    boxes = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg text.value')).map(t => {"
        "const b = t.getBBox(); return [b.x, b.y, b.width, t.textContent]; });"
    )
    assert len(boxes) >= 10
    rows: dict[float, list] = {}
    for x, y, w, _ in boxes:
        rows.setdefault(round(y), []).append((x, x + w))
    for spans in rows.values():
        spans.sort()
        assert all(a[1] <= b[0] + 0.5 for a, b in zip(spans, spans[1:])), spans
    labels = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg text.label')).map(t => t.getBBox().x);"
    )
    assert labels and min(labels) >= 0  # no key runs off the chart's left edge
    browser.save_screenshot(str(shots / "11-facts-dense.png"))
