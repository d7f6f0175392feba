"""A griffe extension: Sphinx roles in docstrings become links or inline code.

The docstrings are Google style (read by mkdocstrings) but name other objects
with Sphinx roles (``:func:`check_tree```, ``:mod:`.config```), which Markdown
would print literally. A role whose target is a name of the API reference
(``jaxpuct.X``, or ``X`` of one of its namespaces, e.g. ``check_tree`` of
``jaxpuct.testing``) becomes a cross-reference that mkdocs-autorefs turns into a
link to that entry; any other target (a module, a relative name, an internal
helper: they have no page) becomes inline code.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import griffe

_ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|obj|exc|const):`(~?)([^`]+)`")


def _documented() -> dict[str, str]:
    """Every name of the API pages: ``{written name: identifier}``, both spellings.

    ``jaxpuct.testing.check_tree`` is reachable as itself and as ``check_tree``; a
    short name two namespaces share (none today) links to neither.
    """
    spec = importlib.util.spec_from_file_location(
        "docs_hooks", Path(__file__).with_name("docs_hooks.py"))
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    full: dict[str, str] = {}
    short: dict[str, list[str]] = {}
    for _, module, _ in hooks.API_PAGES:
        for name in hooks.module_all(module):
            identifier = f"{module}.{name}"
            full[identifier] = identifier
            short.setdefault(name, []).append(identifier)
    full.update({name: ids[0] for name, ids in short.items() if len(ids) == 1})
    return full


class SphinxRolesToCode(griffe.Extension):
    """Rewrites ``:role:`target``` to a link (a documented name) or ```target```."""

    def __init__(self) -> None:
        super().__init__()
        self._documented = _documented()

    def _rewrite(self, match: re.Match[str]) -> str:
        tilde, target = match.groups()
        shown = target.rsplit(".", 1)[-1] if tilde else target
        identifier = self._documented.get(target)
        return f"[`{shown}`][{identifier}]" if identifier else f"`{shown}`"

    def on_object(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(self._rewrite, obj.docstring.value)
