"""The HTML report opened in a real browser: Debian's chromium (apt; test.sh
installs it) driven by playwright through `executable_path` (never
`playwright install`: it cannot download here).

Checked on a run, an A/B comparison and a series page: no console error, no
request leaves the page, every plot drawn with a non-zero size; and with
the 30 script-injection payloads of tests/html_docs.py in labels,
parameters and hosts: no script node, no event-handler attribute, no
javascript: URL, no dialog, none of the elements a payload meant to create,
the same elements as the page of a harmless document of the same shape,
and every payload shown as text. The injected pages are also opened with
their Content-Security-Policy removed, so that the escaping is shown to
hold by itself, not only because the policy blocks scripts.

Without chromium or playwright the tests skip, except when
OPCOST_REQUIRE_BROWSER=1 (test.sh sets it): then they fail.

OPCOST_SCREENSHOT=FILE also writes the screenshot of the golden A/B page
(the README's docs/img/report.png) to FILE."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

import html_docs as H
from opcost.formats import html
from opcost.safetext import printable

REQUIRED = os.environ.get("OPCOST_REQUIRE_BROWSER") == "1"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def browser():
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed (pip install '.[test]')"
    exe = _chromium()
    if why is None and exe is None:
        why = "chromium is not installed (apt-get install chromium; test.sh does)"
    if why:
        if REQUIRED:
            pytest.fail(f"{why}, but OPCOST_REQUIRE_BROWSER=1")
        pytest.skip(why)
    with sync_playwright() as p:
        # --no-sandbox: the tests may run as root, where chromium's sandbox refuses to start.
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class Opened:
    """A page loaded from a file, with what happened while it loaded."""

    def __init__(self, browser, path: Path, width: int = 1100):
        self.console: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        pg = self.page
        pg.on("console", lambda m: self.console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        pg.on("pageerror", lambda e: self.errors.append(str(e)))

        def dialog(d):
            self.dialogs.append(d.message)
            d.dismiss()
        pg.on("dialog", dialog)
        url = path.resolve().as_uri()

        def route(r):
            if r.request.url != url:
                self.requests.append(r.request.url)
                r.abort()
            else:
                r.continue_()
        pg.route("**/*", route)
        pg.goto(url, wait_until="load")
        pg.wait_for_timeout(300)   # onload/onerror/ontoggle handlers would have fired by now

    def live(self) -> dict:
        """What could run: script nodes, on* attributes, javascript: URLs,
        elements carrying a payload's marker."""
        return self.page.evaluate("""() => {
            const all = [...document.querySelectorAll('*')];
            const handlers = [], js = [];
            for (const e of all) for (const a of e.attributes) {
                if (a.name.toLowerCase().startsWith('on')) handlers.push(e.tagName + ' ' + a.name);
                if (/^\\s*javascript:/i.test(a.value)) js.push(e.tagName + ' ' + a.name);
            }
            return {scripts: document.scripts.length + document.querySelectorAll('script').length,
                    handlers, js,
                    marked: all.filter(e => /pwn/i.test(e.id) || /pwn/i.test(e.getAttribute('class') || ''))
                               .map(e => e.tagName + '#' + e.id)};
        }""")

    def tags(self) -> dict:
        return self.page.evaluate("""() => {
            const n = {};
            for (const e of document.querySelectorAll('*')) n[e.tagName] = (n[e.tagName] || 0) + 1;
            return n;
        }""")

    def plots(self) -> list[dict]:
        return [e.bounding_box() for e in self.page.query_selector_all("div.plot > svg, img")]

    def text(self) -> str:
        return self.page.evaluate("() => document.body.textContent")

    def close(self):
        self.page.close()


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _check_clean(o: Opened, n_plots: int) -> None:
    assert o.errors == [], o.errors
    assert [c for c in o.console if c.startswith("error")] == [], o.console
    assert o.requests == [], f"the page asked for {o.requests}"
    assert o.dialogs == [], o.dialogs
    boxes = o.plots()
    assert len(boxes) == n_plots
    assert all(b and b["width"] > 50 and b["height"] > 20 for b in boxes), boxes


# --- every kind of page renders cleanly -----------------------------------------

@pytest.mark.parametrize("kind", ["run", "ab", "series", "runs"])
def test_page_renders_without_errors_and_every_plot_has_a_size(browser, tmp_path, kind):
    if kind == "run":
        data, plots = html.serialize(H.run_doc()), 3
    elif kind == "ab":
        data, plots = html.serialize(H.ab_doc()), 3          # the ratio plot and one per benchmark
    elif kind == "series":
        data, plots = html.serialize(H.series_doc()), 1
    else:
        docs = [H.run_doc(run_id=i, label=f"r{i}", seed=i, params=[{"mode": "thread"}]) for i in range(1, 8)]
        data, plots = html.serialize_runs(docs), 2            # one per benchmark, not one per run
    o = Opened(browser, _write(tmp_path, f"{kind}.html", data))
    try:
        _check_clean(o, plots)
        assert o.live() == {"scripts": 0, "handlers": [], "js": [], "marked": []}
        # the CSP the page declares is the one the browser applies
        csp = o.page.evaluate("() => document.querySelector('meta[http-equiv=Content-Security-Policy]').content")
        assert csp == html.CSP and "script-src" not in csp and "default-src 'none'" in csp
    finally:
        o.close()


# --- 30 injection payloads ------------------------------------------------------

def _injected_docs(payloads: list[str]) -> list[tuple[str, dict]]:
    """The payloads in labels, parameters and hosts of a run, an A/B and a series."""
    n = len(payloads)
    third = n // 3
    run = H.run_doc(label=payloads[0], params=[{"mode": p} for p in payloads[1:third]],
                    host=payloads[third], argv=["opcost", "run", payloads[third + 1]],
                    env_extra={"kernel_version": {"value": payloads[third + 2], "source": payloads[third + 3]}},
                    processes=3, samples=4)
    ab = H.ab_doc(a=payloads[third + 4], b=payloads[third + 5], host=payloads[third + 6],
                  benches=tuple(payloads[third + 7:2 * third]))
    series = H.series_doc(labels=payloads[2 * third:], step_at=5, bench=payloads[2 * third + 1],
                          by=payloads[2 * third + 2])
    return [("run", run), ("ab", ab), ("series", series)]


def _harmless(p: str, i: int) -> str:
    return f"safe{i:02d}" + "x" * 3


def test_thirty_payloads_give_no_live_element_and_show_as_text(browser, tmp_path):
    payloads = H.PAYLOADS
    assert len(payloads) == 30
    evil = _injected_docs(payloads)
    calm = _injected_docs([_harmless(p, i) for i, p in enumerate(payloads)])
    seen_text = ""
    for (kind, doc), (_, calm_doc) in zip(evil, calm):
        data = html.serialize(doc)
        for with_csp in (True, False):
            page = data if with_csp else re.sub(rb'<meta http-equiv="Content-Security-Policy"[^>]*>', b"", data)
            assert with_csp or page != data
            o = Opened(browser, _write(tmp_path, f"{kind}-{with_csp}.html", page))
            try:
                assert o.dialogs == [], f"{kind}: a payload ran: {o.dialogs}"
                assert o.errors == [], o.errors
                assert o.requests == [], f"{kind}: the page asked for {o.requests}"
                if with_csp:
                    assert [c for c in o.console if c.startswith("error")] == [], o.console
                assert o.live() == {"scripts": 0, "handlers": [], "js": [], "marked": []}, kind
                n_plots = len(o.plots())
                assert n_plots > 0 and all(b and b["width"] > 0 and b["height"] > 0 for b in o.plots())
                if with_csp:
                    got_tags = o.tags()
                seen_text += o.text()
            finally:
                o.close()
        c = Opened(browser, _write(tmp_path, f"{kind}-calm.html", html.serialize(calm_doc)))
        try:
            # The same document with harmless strings has exactly the same elements:
            # nothing in the page came from a payload.
            assert got_tags == c.tags(), kind
        finally:
            c.close()
    missing = [p for p in payloads if printable(p) not in seen_text]
    assert missing == [], f"not shown as text: {missing}"


# --- the README's screenshot ----------------------------------------------------

def test_screenshot_of_the_golden_ab_page(browser, tmp_path):
    """The golden A/B page (tests/golden/ab.html: `opcost ab syscall.null
    signal.install --a spin=1 --b spin=21` on the fake clock) as a picture:
    the README's docs/img/report.png when OPCOST_SCREENSHOT names it; small
    enough to commit."""
    golden = Path(__file__).resolve().parent / "golden" / "ab.html"
    o = Opened(browser, golden, width=980)
    try:
        _check_clean(o, 3)
        out = Path(os.environ.get("OPCOST_SCREENSHOT") or tmp_path / "report.png")
        out.parent.mkdir(parents=True, exist_ok=True)
        height = min(1400, o.page.evaluate("() => document.documentElement.scrollHeight"))
        o.page.screenshot(path=str(out), full_page=True, clip={"x": 0, "y": 0, "width": 980, "height": height})
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert 10_000 < out.stat().st_size < 300_000
    finally:
        o.close()
