"""jaxpuct: batched PUCT tree and graph search in JAX.

Thousands of AlphaZero-style searches advance in lockstep inside one
``jax.jit``; the policy-value network is called once per simulation for the
whole batch. The interface follows ``mctx`` (DeepMind), so an mctx
``recurrent_fn`` runs unchanged.

The top level holds the types, the configurations, the policies (AlphaZero,
Gumbel, chance nodes, sampled actions), the search, the tree and tree reuse.
The pieces behind them live in their modules:
``jaxpuct.selection`` (PUCT scores), ``jaxpuct.final_move`` (visit targets,
LCB, target pruning), ``jaxpuct.roots`` (Dirichlet noise), ``jaxpuct.solver``,
``jaxpuct.graph``, ``jaxpuct.engine`` (the loop and its protocols).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from jaxpuct.graph import GraphConfig
from jaxpuct.gumbel import CompletedQConfig, gumbel_policy
from jaxpuct.policies import alphazero_policy
from jaxpuct.reuse import subtree, subtree_or_init, subtree_path
from jaxpuct.roots import init_tree
from jaxpuct.sampled import sampled_gumbel_policy, sampled_policy  # spaces: jaxpuct.sampled
from jaxpuct.sampled_loss import sampled_log_prob, sampled_policy_loss
from jaxpuct.search import search
from jaxpuct.selection import PUCTConfig, SelectionRule
from jaxpuct.solver import SolverConfig
from jaxpuct.stochastic import (
    ChanceRecurrentFnOutput,
    DecisionRecurrentFnOutput,
    stochastic_gumbel_policy,
    stochastic_policy,
    stochastic_search,
)
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree
from jaxpuct.types import PolicyOutput, RecurrentFnOutput, RootFnOutput, SearchSummary
from jaxpuct.virtual_loss import VirtualLoss

__version__ = "0.5.0"

__all__ = [
    "ChanceRecurrentFnOutput",
    "CompletedQConfig",
    "DecisionRecurrentFnOutput",
    "GraphConfig",
    "ILLEGAL",
    "PUCTConfig",
    "PolicyOutput",
    "RecurrentFnOutput",
    "RootFnOutput",
    "SearchSummary",
    "SelectionRule",
    "SolverConfig",
    "Tree",
    "UNEXPANDED",
    "VirtualLoss",
    "alphazero_policy",
    "gumbel_policy",
    "init_tree",
    "sampled_gumbel_policy",
    "sampled_log_prob",
    "sampled_policy",
    "sampled_policy_loss",
    "search",
    "stochastic_gumbel_policy",
    "stochastic_policy",
    "stochastic_search",
    "subtree",
    "subtree_or_init",
    "subtree_path",
]

# Names the top level had in 0.4.0, now in their modules: still reachable, with a
# DeprecationWarning that says where they live.
_MOVED = {
    "completed_qvalues": ("jaxpuct.selection", "puct_qvalues"),
    "dirichlet_noise": ("jaxpuct.roots", "dirichlet_noise"),
    "lcb_action": ("jaxpuct.final_move", "lcb_action"),
    "masked_softmax": ("jaxpuct.numerics", "masked_softmax"),
    "node_scores": ("jaxpuct.selection", "node_scores"),
    "prune_policy_target": ("jaxpuct.final_move", "prune_policy_target"),
    "puct_rule": ("jaxpuct.selection", "puct_rule"),
    "puct_scores": ("jaxpuct.selection", "puct_scores"),
    "rebuild_hash_table": ("jaxpuct.graph", "rebuild_hash_table"),
    "sample_action": ("jaxpuct.final_move", "sample_action"),
    "solver_action": ("jaxpuct.solver", "solver_action"),
    "value_weighted_policy": ("jaxpuct.final_move", "value_weighted_policy"),
    "visit_policy": ("jaxpuct.final_move", "visit_policy"),
}
# Subpackages reachable as attributes (``jaxpuct.testing.check_tree`` after a plain
# ``import jaxpuct``) but loaded only on first use, so that ``import jaxpuct`` stays
# light (PEP 562: a module-level __getattr__).
_LAZY_SUBMODULES = ("alphazero", "envs", "memory", "muzero", "testing", "visualize")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _MOVED:
        module, attribute = _MOVED[name]
        warnings.warn(f"jaxpuct.{name} moved to {module}.{attribute} in 0.5.0.",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))
