#!/usr/bin/env python3
"""Opens one of mpiq's report pages (report.html) in Debian's Chromium,
headless, through Playwright, does what a reader would (opens tree nodes,
a rank, a search) and prints what the page showed as one JSON object on
stdout, for the Rust test to assert on (tests/tests/html.rs). Also keeps a
screenshot of the whole page.

Usage: check_page.py PAGE SCREENSHOT [--open LABEL]... [--rank N] [--search Q]

Every request the page makes is recorded (the page itself is the only one
allowed), every console message and every uncaught error; the time to the
first contentful paint is Chromium's own. Nothing is asserted here.
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",  # tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-dev-shm-usage",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("screenshot")
    ap.add_argument("--open", action="append", default=[], help="the label of a tree node to open")
    ap.add_argument("--rank", type=int, help="a rank to open by clicking its link")
    ap.add_argument("--search", help="a text to type into the search box")
    ap.add_argument("--chromium", default=os.environ.get("MPIQ_CHROMIUM", "/usr/bin/chromium"))
    a = ap.parse_args()
    url = pathlib.Path(a.page).resolve().as_uri()
    out = {"url": url, "requests": [], "console": [], "errors": []}
    with tempfile.TemporaryDirectory(prefix="mpiq-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path=a.chromium, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        page.on("request", lambda r: out["requests"].append(r.url))
        page.on("console", lambda m: out["console"].append({"type": m.type, "text": m.text}))
        page.on("pageerror", lambda e: out["errors"].append(str(e)))
        t0 = time.monotonic()
        page.goto(url, wait_until="load", timeout=60000)
        out["load_s"] = round(time.monotonic() - t0, 3)
        ready = page.wait_for_function("document.body && document.body.dataset.ready === '1'", timeout=30000) is not None
        out["ready"] = ready
        out["first_paint_ms"] = page.evaluate(
            "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null")
        out["verdict"] = page.inner_text("#badge")
        out["summary"] = page.inner_text("#summary")
        out["exit"] = page.inner_text("#exit")
        out["waited"] = page.inner_text("#waited")
        out["summary_visible"] = page.is_visible("#summary")
        out["graph"] = page.evaluate("""() => ({
            nodes: Array.from(document.querySelectorAll('#graph g.node')).map(g => Number(g.dataset.rank)),
            on_cycle: Array.from(document.querySelectorAll('#graph g.node.oncycle')).map(g => Number(g.dataset.rank)),
            waited: Array.from(document.querySelectorAll('#graph g.node.waited')).map(g => Number(g.dataset.rank)),
            edges: Array.from(document.querySelectorAll('#graph line')).map(l => [Number(l.dataset.from), Number(l.dataset.to), l.getAttribute('class') || '']),
            note: (document.querySelector('#graph .note') || {}).textContent || null })""")
        out["tree_rows"] = page.evaluate(
            "() => Array.from(document.querySelectorAll('#tree .tnode > .row')).filter(r => r.offsetParent !== null).map(r => r.textContent)")
        out["opened"] = {}
        for label in a.open:
            row = page.locator("#tree .tnode > .row", has=page.locator(".lbl", has_text=label)).filter(visible=True).first
            row.click()
            li = row.locator("xpath=..")
            out["opened"][label] = li.locator(":scope > div > .tranks").first.inner_text()
        if a.rank is not None:
            page.locator(f"a.rank[data-rank='{a.rank}']").filter(visible=True).first.click()
            out["rank_detail"] = page.inner_text("#rank")
            # Every folded part, outer first (a service thread, then its runs of frames).
            for summary in page.locator("#rank details > summary").all():
                summary.click()
            out["rank_detail_unfolded"] = page.inner_text("#rank")
        if a.search:
            page.fill("#search", a.search)
            page.press("#search", "Enter")
            out["search_result"] = page.inner_text("#search-result")
            out["search_hits"] = page.evaluate(
                "() => Array.from(document.querySelectorAll('#tree .tnode.hit > .row .lbl')).map(e => e.textContent)")
        out["timeline"] = page.evaluate("""() => ({
            rows: Array.from(document.querySelectorAll('#timeline text.rl')).map(t => Number(t.dataset.rank)),
            calls: document.querySelectorAll('#timeline rect.call').length,
            open_calls: Array.from(document.querySelectorAll('#timeline rect.call.open')).map(r => [Number(r.dataset.rank), r.dataset.call]),
            pending: document.querySelectorAll('#timeline rect.pending').length,
            last: (document.querySelector('#last-collectives') || {}).innerText || null,
            hidden: document.querySelector('#timeline').closest('section').hidden })""")
        page.screenshot(path=a.screenshot, full_page=True)
        ctx.close()
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
