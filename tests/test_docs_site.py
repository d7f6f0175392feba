"""The built documentation site, opened in a real headless browser (Chromium).

One Chromium process loads a probe page that holds the site's pages in iframes
(file:// pages may read each other with ``--allow-file-access-from-files``) and
writes what it found as JSON into its own DOM, which ``--dump-dom`` prints. It
checks that every guide page loads with its heading, that every figure of the
pages that have one is decoded (``naturalWidth > 0``), and that the API page of
``alphazero_policy`` shows its signature with every parameter in order, and that
its docstring's reference to ``jaxpuct.search`` (a Sphinx role in the source) is a
link to that entry, on the same page.

The site is ``site/`` as ``make docs`` (run by ``make test``) leaves it; without
one it is built into a temporary folder. Without Chromium the test is skipped,
except in CI (``CI`` set), where ``.ci/run`` installs it and its absence fails.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jaxpuct

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")

# The iframes are in the page itself, so its load event waits for every page and
# image in them; the handler reads them synchronously before --dump-dom prints the
# DOM (no timers, no virtual time: nothing for the browser to wait on).
PROBE = """<!DOCTYPE html><html><body><pre id="result">pending</pre>%s<script>
window.addEventListener("load", () => {
  const found = {};
  for (const frame of document.querySelectorAll("iframe")) {
    const doc = frame.contentDocument;
    if (doc === null || doc.querySelector("h1") === null) { found[frame.src] = null; continue; }
    const heading = doc.getElementById("jaxpuct.alphazero_policy");
    const signature = heading && heading.parentElement.querySelector(".doc-signature");
    found[frame.src] = {
      h1: doc.querySelector("h1").textContent.replace("\\u00b6", "").trim(),
      images: [...doc.images].map(i => [i.getAttribute("src"), i.naturalWidth]),
      signature: signature ? signature.textContent : null,
      links: heading ? [...heading.parentElement.querySelectorAll("a.autorefs")].map(
        a => [a.getAttribute("href"), doc.getElementById(a.hash.slice(1)) !== null]) : [],
    };
  }
  document.getElementById("result").textContent = JSON.stringify(found);
});
</script></body></html>
"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed, and .ci/run should have installed it")
    pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run "
                "installs it in CI)")


def built_site(tmp_path: Path) -> Path:
    """``site/`` if ``make docs`` built it, else a fresh strict build in ``tmp_path``."""
    if (ROOT / "site" / "index.html").exists():
        return ROOT / "site"
    out = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                   cwd=ROOT, check=True)
    return out


def site_page(markdown: Path) -> str:
    """The site's page (relative to its root) for a Markdown file of the repository."""
    if markdown == ROOT / "README.md":
        return "index.html"
    rel = markdown.relative_to(DOCS).with_suffix(".html")
    return str(rel.with_name("index.html") if rel.stem == "README" else rel)


def heading(markdown: Path) -> str:
    first = next(line for line in markdown.read_text().splitlines() if line.startswith("# "))
    return first[2:].replace("`", "").strip()


def test_guide_pages_figures_and_the_alphazero_policy_signature_load_in_chromium(tmp_path):
    browser = chromium()
    site = built_site(tmp_path)
    guide = sorted((DOCS / "guide").glob("*.md"))
    figures = {p: len(_IMAGE.findall(p.read_text()))
               for p in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]}
    figures = {p: n for p, n in figures.items() if n}
    pages = {site_page(p): p for p in [*guide, *figures]}
    pages["api/jaxpuct.html"] = None
    urls = {(site / page).as_uri(): page for page in pages}
    probe = tmp_path / "probe.html"
    probe.write_text(PROBE % "".join(f'<iframe src="{url}"></iframe>' for url in urls))

    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    run = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    match = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert match is not None, dom[:2000]
    text = match.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    assert not text.startswith(("pending", "error")), text
    found = {urls[url]: value for url, value in json.loads(text).items()}

    for page, source in pages.items():
        assert found[page] is not None, f"{page} did not load (no page or no heading)"
        if source is not None and source.parent == DOCS / "guide":
            assert found[page]["h1"] == heading(source), page
        if source in figures:
            images = [img for img in found[page]["images"] if not img[0].startswith("assets/")]
            assert len(images) >= figures[source], (page, images)
            for src, width in images:
                assert width > 0, f"{page}: image {src} did not load"

    shown = found["api/jaxpuct.html"]["signature"]
    assert shown is not None and shown.startswith("alphazero_policy("), shown
    names = list(inspect.signature(jaxpuct.alphazero_policy).parameters)
    positions = [m.start() if (m := re.search(rf"\b{name}:", shown)) else -1 for name in names]
    assert -1 not in positions, dict(zip(names, positions, strict=True))
    assert positions == sorted(positions), dict(zip(names, positions, strict=True))
    # ":func:`jaxpuct.search`" in the docstring: a link whose target is on the page.
    assert ["#jaxpuct.search", True] in found["api/jaxpuct.html"]["links"], \
        found["api/jaxpuct.html"]["links"]
