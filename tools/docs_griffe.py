"""A griffe extension: Sphinx roles in docstrings become Markdown inline code.

The docstrings are Google style (read by mkdocstrings) but name other objects
with Sphinx roles (``:func:`check_tree```, ``:mod:`.config```), which Markdown
would print literally. They become ```check_tree``` / ```.config```: inline
code, not links, since a relative name cannot be resolved to a page reliably.
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|obj|exc|const):`~?([^`]+)`")


class SphinxRolesToCode(griffe.Extension):
    """Rewrites ``:role:`target``` to ```target``` in every docstring."""

    def on_object(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
