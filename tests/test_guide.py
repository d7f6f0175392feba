"""Runs every Python example of the user guide (``docs/guide/*.md``).

Each page's ```` ```python ```` blocks are executed in order, in one namespace per
page, in this process (so JAX is imported once). A block whose fence reads
```` ```python no-run ```` is shown but not executed; keep those rare. Code is
compiled with the page's file name and the block's line numbers, so a failure's
traceback points at the line of the Markdown file.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide"
PAGES = sorted(p.name for p in GUIDE.glob("*.md") if p.name != "README.md")
# The pages that train, run arenas or compile several policies: in the whole suite
# only (make test-all); the others run in make test too.
SLOW_PAGES = ("choosing_knobs.md", "coming_from_mctx.md", "reading_a_search.md",
              "selfplay_loop.md", "your_network.md")

# Packages of the `test` extra that a page may need; without them the page is skipped.
OPTIONAL = ("mctx", "pgx")
_FENCE = re.compile(r"^```(\S*)(.*)$")
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def code_blocks(text: str) -> list[tuple[int, str, str]]:
    """``(first line number (1-based), info string, code)`` of each fenced block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        info = (match.group(1) + match.group(2)).strip()
        start, i = i + 1, i + 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        if i == len(lines):
            raise ValueError(f"unclosed code block at line {start}")
        blocks.append((start + 1, info, "\n".join(lines[start:i])))
        i += 1
    return blocks


def runnable_blocks(page: str) -> list[tuple[int, str]]:
    """``(first line, code)`` of the blocks of ``page`` that are executed."""
    out = []
    for line, info, code in code_blocks((GUIDE / page).read_text()):
        words = info.split()
        if words and words[0] == "python" and "no-run" not in words[1:]:
            out.append((line, code))
    return out


def test_pages_exist_and_are_indexed():
    assert PAGES, "docs/guide has no page"
    index = (GUIDE / "README.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for page in PAGES:
        assert f"({page})" in index, f"docs/guide/README.md does not link {page}"
        assert f"(docs/guide/{page})" in readme, f"README.md does not link {page}"


def test_relative_links_resolve():
    for page in ["README.md"] + PAGES:
        for target, _ in _LINK.findall((GUIDE / page).read_text()):
            if "://" not in target:
                assert (GUIDE / target).exists(), f"{page} links to missing {target}"


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff not installed")
def test_examples_pass_ruff(tmp_path):
    # Each page's blocks as one module; imports may follow code (a page introduces
    # them where they are first needed).
    for page in PAGES:
        code = "\n\n".join(code for _, code in runnable_blocks(page)) + "\n"
        (tmp_path / f"{page[:-3]}.py").write_text(code)
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
         str(ROOT / "pyproject.toml"), "--config", 'lint.isort.known-first-party=["jaxpuct"]',
         "--extend-ignore", "E402", str(tmp_path)],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_block_parser():
    text = "x\n```python\na = 1\n```\n\n```python no-run\nb\n```\n```\nplain\n```\n"
    assert code_blocks(text) == [(3, "python", "a = 1"), (7, "python no-run", "b"),
                                 (10, "", "plain")]


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=[pytest.mark.slow] if p in SLOW_PAGES else []) for p in PAGES])
def test_page_examples_run(page):
    blocks = runnable_blocks(page)
    assert blocks, f"{page} has no runnable python block"
    namespace = {"__name__": f"guide_{page[:-3]}"}
    path = str(GUIDE / page)
    with warnings.catch_warnings():
        # A warning a page does not expect fails its test (pages that show one catch it).
        warnings.simplefilter("error")
        # Third-party deprecation notices are not the guide's business.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        for line, code in blocks:
            # Pad with newlines so that tracebacks give the Markdown file's line numbers.
            try:
                exec(compile("\n" * (line - 1) + code, path, "exec"), namespace)
            except ModuleNotFoundError as err:
                if err.name in OPTIONAL:
                    pytest.skip(f"{page} needs {err.name} (the test extra installs it)")
                raise


def test_readme_examples_run():
    """The README's own python blocks (quickstart, graph search) run as printed."""
    namespace = {"__name__": "readme"}
    path = str(ROOT / "README.md")
    blocks = [(line, code) for line, info, code in code_blocks((ROOT / "README.md").read_text())
              if info.split()[:1] == ["python"]]
    assert len(blocks) >= 2
    for line, code in blocks:
        exec(compile("\n" * (line - 1) + code, path, "exec"), namespace)
    assert [int(n) for n in namespace["tree"].num_nodes] == [35, 35]


def test_sampled_search_page_example_runs():
    """docs/sampled_search.md (a reference page, not in the guide) has one example:
    a continuous search, one compilation; it asserts its move nears the target."""
    page = ROOT / "docs" / "sampled_search.md"
    blocks = [(line, code) for line, info, code in code_blocks(page.read_text())
              if info.split()[:1] == ["python"]]
    assert len(blocks) == 1
    namespace = {"__name__": "sampled_search_page"}
    for line, code in blocks:
        exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)
