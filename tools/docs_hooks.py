"""MkDocs hooks: the pages of the site that are generated at build time.

* ``index.md``, ``contributing.md`` and ``changelog.md`` are the repository's
  ``README.md``, ``CONTRIBUTING.md`` and ``CHANGELOG.md``, read at build time (one
  copy of each text; a repository reader sees the same files on its own). Their
  links into ``docs/`` are rewritten to be relative to the site's root.
* ``api/*.md``: one reference page per public namespace, a ``:::`` block (rendered
  by mkdocstrings from the docstrings) for every name in that module's
  ``__all__``, read from the source without importing it (no JAX at build time).

Sphinx roles in docstrings (``:func:`x```) become links to the API entries (or inline
code, for a name without one) by the
griffe extension in ``tools/docs_griffe.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]

# Root-level Markdown pages: (page on the site, file in the repository).
ROOT_PAGES = (("index.md", "README.md"), ("contributing.md", "CONTRIBUTING.md"),
              ("changelog.md", "CHANGELOG.md"))

# API pages: (page, module, one-line introduction). Each page lists the module's
# ``__all__`` in its order.
API_PAGES = (
    ("api/jaxpuct.md", "jaxpuct",
     "The top level: types, configurations, policies, the search, trees and tree reuse."),
    ("api/sampled.md", "jaxpuct.sampled",
     "Sampled MuZero: the action spaces, the expander and the output of the sampled "
     "policies."),
    ("api/testing.md", "jaxpuct.testing",
     "Oracles and checkers, shipped with the package."),
    ("api/alphazero.md", "jaxpuct.alphazero",
     "AlphaZero-style training around the search (imports Flax, optax and orbax)."),
    ("api/muzero.md", "jaxpuct.muzero",
     "MuZero: search with a learned model (imports Flax and optax)."),
)

# A link from a root-level page into docs/: ``](docs/x.md)`` or ``](docs/x.png)``.
_DOCS_LINK = re.compile(r"\]\(docs/")


def module_all(module: str) -> list[str]:
    """The names in ``module.__all__``, read from its source file."""
    rel = Path(*module.split("."))
    path = ROOT / rel / "__init__.py"
    if not path.exists():
        path = ROOT / rel.with_suffix(".py")
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)):
            return [ast.literal_eval(e) for e in node.value.elts]
    raise ValueError(f"{module} ({path}) defines no __all__: its API page would be empty")


def api_page(module: str, intro: str) -> str:
    """The Markdown of one API page: a heading and a ``:::`` block per public name."""
    lines = [f"# `{module}`", "", intro, "",
             f"`from {module} import *` gives exactly these names (its `__all__`).", ""]
    for name in module_all(module):
        lines += [f"::: {module}.{name}", ""]
    return "\n".join(lines)


def root_page(source: str) -> str:
    """A root-level Markdown file with its ``docs/...`` links made site-relative."""
    return _DOCS_LINK.sub("](", (ROOT / source).read_text())


def on_files(files: Files, config) -> Files:
    for page, source in ROOT_PAGES:
        files.append(File.generated(config, page, content=root_page(source)))
    for page, module, intro in API_PAGES:
        files.append(File.generated(config, page, content=api_page(module, intro)))
    return files
