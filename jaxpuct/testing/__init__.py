"""Test and benchmark utilities for jaxpuct: exact oracles, invariants, conformance.

Not imported by ``import jaxpuct``; use ``import jaxpuct.testing``. Depends on
JAX, NumPy and chex only.

Submodules:

* :mod:`jaxpuct.testing.tictactoe`: tic-tac-toe rules (NumPy and batched JAX),
  exact minimax over all 4520 reachable non-terminal positions, and the search's
  ``root``/``recurrent_fn`` for it;
* :mod:`jaxpuct.testing.random_games`: random finite games (trees or DAGs) solved
  by backward induction, with their ``root``/``recurrent_fn``;
* :mod:`jaxpuct.testing.stochastic_games`: stochastic games for chance-node
  search: a hashed game, and 2048 on an ``n x n`` board with an exact NumPy
  expectimax solver;
* :mod:`jaxpuct.testing.synthetic`: a cheap hashed-integer game for benchmarks
  (and its factored-policy variant);
* :mod:`jaxpuct.testing.two_level`: a two-level game with many root actions and
  a known optimum, and the exact probability that ``K`` samples drawn without
  replacement contain it (the oracle of sampled search);
* :mod:`jaxpuct.testing.pathfinding`: multi-agent path finding on a grid (``5^F``
  joint moves), its JAX model and an exact A* planner;
* :mod:`jaxpuct.testing.pendulum`: Gymnasium's ``Pendulum-v1`` dynamics in JAX (a
  continuous action);
* :mod:`jaxpuct.testing.pure_search`: search functions with a uniform prior and a
  zero value for any :class:`jaxpuct.envs.adapter.Environment`;
* :mod:`jaxpuct.testing.checks`: :func:`check_tree`, structural invariants of a
  finished search tree;
* :mod:`jaxpuct.testing.conformance`: :func:`check_recurrent_fn`, checks of a
  user's ``recurrent_fn`` and root against the search's interface.
"""

from jaxpuct.testing import (
    pathfinding,
    pendulum,
    pure_search,
    random_games,
    stochastic_games,
    synthetic,
    tictactoe,
    two_level,
)
from jaxpuct.testing._common import (
    MASKED_LOGIT,
    RecurrentFn,
    mask_illegal_logits,
    mask_root_logits,
    masked_logits,
)
from jaxpuct.testing.checks import check_tree
from jaxpuct.testing.conformance import (
    ConformanceError,
    ConformanceReport,
    ConformanceWarning,
    check_recurrent_fn,
    check_root,
)
from jaxpuct.testing.pure_search import make_pure_search_fns, zero_apply

__all__ = [
    "ConformanceError",
    "ConformanceReport",
    "ConformanceWarning",
    "MASKED_LOGIT",
    "RecurrentFn",
    "check_recurrent_fn",
    "check_root",
    "check_tree",
    "make_pure_search_fns",
    "mask_illegal_logits",
    "mask_root_logits",
    "masked_logits",
    "pathfinding",
    "pendulum",
    "pure_search",
    "random_games",
    "stochastic_games",
    "synthetic",
    "tictactoe",
    "two_level",
    "zero_apply",
]
