"""jaxpuct: batched PUCT tree and graph search in JAX.

Thousands of AlphaZero-style searches advance in lockstep inside one
``jax.jit``; the policy-value network is called once per simulation for the
whole batch. The interface follows ``mctx`` (DeepMind), so an mctx
``recurrent_fn`` runs unchanged.
"""

from jaxpuct.final_move import lcb_action, prune_policy_target
from jaxpuct.graph import GraphConfig, rebuild_hash_table
from jaxpuct.gumbel import CompletedQConfig, gumbel_policy
from jaxpuct.numerics import masked_softmax
from jaxpuct.policies import (
    alphazero_policy,
    dirichlet_noise,
    sample_action,
    value_weighted_policy,
    visit_policy,
)
from jaxpuct.reuse import subtree, subtree_or_init, subtree_path
from jaxpuct.roots import init_tree
from jaxpuct.search import search
from jaxpuct.selection import (
    PUCTConfig,
    SelectionRule,
    completed_qvalues,
    node_scores,
    puct_rule,
    puct_scores,
)
from jaxpuct.solver import SolverConfig, solver_action
from jaxpuct.stochastic import (
    ChanceRecurrentFnOutput,
    DecisionRecurrentFnOutput,
    stochastic_policy,
    stochastic_search,
)
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree
from jaxpuct.types import PolicyOutput, RecurrentFnOutput, RootFnOutput, SearchSummary
from jaxpuct.virtual_loss import VirtualLoss

__version__ = "0.4.0"

__all__ = [
    "ChanceRecurrentFnOutput",
    "CompletedQConfig",
    "DecisionRecurrentFnOutput",
    "GraphConfig",
    "ILLEGAL",
    "UNEXPANDED",
    "PUCTConfig",
    "PolicyOutput",
    "RecurrentFnOutput",
    "RootFnOutput",
    "SearchSummary",
    "SelectionRule",
    "SolverConfig",
    "Tree",
    "VirtualLoss",
    "alphazero_policy",
    "completed_qvalues",
    "dirichlet_noise",
    "gumbel_policy",
    "init_tree",
    "lcb_action",
    "masked_softmax",
    "node_scores",
    "prune_policy_target",
    "puct_rule",
    "puct_scores",
    "rebuild_hash_table",
    "sample_action",
    "search",
    "solver_action",
    "stochastic_policy",
    "stochastic_search",
    "subtree",
    "subtree_or_init",
    "subtree_path",
    "value_weighted_policy",
    "visit_policy",
]

# Subpackages reachable as attributes (``jaxpuct.testing.check_tree`` after a plain
# ``import jaxpuct``) but loaded only on first use, so that ``import jaxpuct`` stays
# light (PEP 562: a module-level __getattr__).
_LAZY_SUBMODULES = ("alphazero", "envs", "memory", "testing", "visualize")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))
