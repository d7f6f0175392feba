"""Makes the checkout's ``jaxpuct`` importable when ``pytest`` runs without it on
``sys.path`` (plain ``pytest``, unlike ``python -m pytest``, does not add the
current directory)."""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
