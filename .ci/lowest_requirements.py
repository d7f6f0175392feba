"""Prints the requirements of the lowest-versions environment (``make test-lowest``).

The core dependencies (jax, jaxlib, chex, numpy) and the test runner (pytest,
hypothesis), each with the lower bound ``pyproject.toml`` declares, one a line; uv's
``--resolution lowest-direct`` then installs exactly those bounds. Read with a regular
expression rather than ``tomllib`` so that it runs on Python 3.10 too.
"""

import re
import sys
from pathlib import Path

PACKAGES = ("jax", "jaxlib", "chex", "numpy", "pytest", "hypothesis")


def main() -> int:
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    for name in PACKAGES:
        found = re.search(rf'"{re.escape(name)}>=([0-9][^",;\s]*)"', text)
        if found is None:
            print(f"pyproject.toml declares no lower bound for {name}", file=sys.stderr)
            return 1
        print(f"{name}>={found.group(1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
