"""Optional dependencies: a clear error when a subpackage's extra is not installed.

The core (``import jaxpuct``) needs only jax, chex and numpy. The training
subpackages need Flax, optax and orbax, which ``pip install 'jaxpuct[train]'``
installs (``[examples]`` includes them).
"""

from __future__ import annotations

import importlib.util


def require(subpackage: str, modules: tuple[str, ...], extra: str) -> None:
    """Raises ``ImportError`` naming what to install if any of ``modules`` is missing.

    Called at the top of a subpackage's ``__init__``, before its own imports, so
    the user reads which extra to install rather than a traceback from deep inside.
    """
    missing = [name for name in modules if _missing(name)]
    if missing:
        raise ImportError(
            f"{subpackage} needs {', '.join(missing)}, which the core install does not "
            f"include: pip install 'jaxpuct[{extra}]'")


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a parent package missing, or a None entry
        return True
