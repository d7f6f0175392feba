"""Test and benchmark utilities for jaxpuct: exact oracles, invariants, conformance.

Not imported by ``import jaxpuct``; use ``import jaxpuct.testing``. Depends on
JAX, NumPy and chex only.

Submodules:

* :mod:`jaxpuct.testing.tictactoe`: tic-tac-toe rules (NumPy and batched JAX),
  exact minimax over all 4520 reachable non-terminal positions, and the search's
  ``root``/``recurrent_fn`` for it;
* :mod:`jaxpuct.testing.random_games`: random finite games (trees or DAGs) solved
  by backward induction, with their ``root``/``recurrent_fn``;
"""

from jaxpuct.testing import random_games, tictactoe
from jaxpuct.testing._common import (
    MASKED_LOGIT,
    RecurrentFn,
    mask_illegal_logits,
    mask_root_logits,
    masked_logits,
)

__all__ = [
    "MASKED_LOGIT",
    "RecurrentFn",
    "mask_illegal_logits",
    "mask_root_logits",
    "masked_logits",
    "random_games",
    "tictactoe",
]
