"""Shared fixtures of the core-search tests: small random games, jitted searches,
and the structural checks every finished tree must pass.

Every jitted function here has fixed small shapes and static hyper-parameters, so
the test modules that import it share its compilations.

The search is compiled with XLA's cheap CPU pipeline (``FAST_COMPILE``): it cuts
the compile time of a search several-fold on CPU, and the semantics are those of
any XLA compilation (the tests that compare two searches compile both the same way).
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct import ILLEGAL, UNEXPANDED, PUCTConfig
from jaxpuct.testing import checks as testing_checks
from jaxpuct.testing import random_games

FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


# ``jax.jit(compiler_options=...)`` is missing from the oldest jax the project supports;
# there the same two options come from conftest's ``XLA_FLAGS``, set for every compile.
_JIT_HAS_COMPILER_OPTIONS = "compiler_options" in inspect.signature(jax.jit).parameters


def _jit_with(options: dict):
    """A ``jax.jit`` (usable as ``@f`` or ``@f(static_argnames=...)``) compiling with
    ``options``."""
    def jit_(fun=None, **kwargs):
        if fun is None:
            return functools.partial(jit_, **kwargs)
        if _JIT_HAS_COMPILER_OPTIONS:
            kwargs["compiler_options"] = options
        return jax.jit(fun, **kwargs)
    return jit_


jit = _jit_with(FAST_COMPILE)
"""``jax.jit`` with the cheap CPU compile pipeline."""


# For a search that runs long (thousands of roots, hundreds of simulations): there
# an optimised executable repays its dearer compile. The K = 16 tic-tac-toe oracle
# (3,430 roots, 160 simulations) took 1.9 s to compile and 10.9 s to run with
# FAST_COMPILE, and 3.9 + 3.1 s with this (XLA's defaults: 9.8 + 2.5 s).
OPTIMISED_COMPILE = {"xla_backend_optimization_level": 2,
                     "xla_llvm_disable_expensive_passes": True}

jit_optimised = _jit_with(OPTIMISED_COMPILE)
"""``jax.jit`` with XLA's optimisations (cheap LLVM passes) for long-running searches."""


# ------------------------------------------------------------------ random games

NUM_ACTIONS = 3
GAME_DEPTH = 4
GAME_NODES = sum(NUM_ACTIONS**d for d in range(GAME_DEPTH + 1))  # 121: the largest tree


def game_forest(seeds, **kwargs) -> tuple[random_games.RandomGame, np.ndarray, list]:
    """Games ``random_games.random_game(seed, 3, 4, **kwargs)``, each padded to
    ``GAME_NODES`` nodes and stacked: ``(forest, roots [B], games)``. Every forest of
    ``B`` games has the same shapes, so searches over it share a compilation."""
    games = [random_games.random_game(int(s), NUM_ACTIONS, GAME_DEPTH, **kwargs) for s in seeds]
    forest, roots = random_games.stack_games([random_games.pad_game(g, GAME_NODES) for g in games])
    return forest, roots, games


def check_game_proofs(tree: jaxpuct.Tree, forest: random_games.RandomGame) -> np.ndarray:
    """Proven used nodes hold the backward-induction value; returns ``[B, N]`` proven."""
    exact = random_games.game_values(forest)
    nodes = np.asarray(tree.embeddings)
    plies = np.asarray(tree.proof_plies)
    used = np.arange(plies.shape[1])[None, :] < np.asarray(tree.num_nodes)[:, None]
    proven = used & (plies >= 0)
    expected = np.where(nodes >= 0, exact[np.maximum(nodes, 0)], 0.0)
    np.testing.assert_allclose(np.asarray(tree.node_values)[proven], expected[proven],
                               atol=1e-5, rtol=0)
    return proven


def forest_bounds(forest: random_games.RandomGame) -> tuple[np.ndarray, np.ndarray]:
    """``[N]`` lower/upper bounds of every return a search can back up into a node.

    A backed-up return at node ``g`` is either the value the network gives at ``g``
    (its first evaluation, or a stop there) or ``r(g, a) + d(g, a) * x`` for a return
    ``x`` at the child. Computed bottom-up (ids are topologically sorted).
    """
    children = np.asarray(forest.children)
    reward = np.asarray(forest.reward, np.float64)
    discount = np.asarray(forest.discount, np.float64)
    value = np.where(np.asarray(forest.terminal), 0.0, np.asarray(forest.value, np.float64))
    lo, hi = value.copy(), value.copy()
    for g in range(children.shape[0] - 1, -1, -1):
        for a in np.flatnonzero(children[g] >= 0):
            c = children[g, a]
            ends = (reward[g, a] + discount[g, a] * lo[c], reward[g, a] + discount[g, a] * hi[c])
            lo[g] = min(lo[g], *ends)
            hi[g] = max(hi[g], *ends)
    return lo, hi


def _poisoned(recurrent_fn, poison):
    """``recurrent_fn`` whose output for batch element ``poison`` (traced; -1 = none)
    has NaN value and NaN logits: a diverged network, for one tree only."""

    def fn(params, key, action, embedding):
        out, new_embedding = recurrent_fn(params, key, action, embedding)
        bad = jnp.arange(action.shape[0]) == poison
        return out.replace(
            value=jnp.where(bad, jnp.nan, out.value),
            prior_logits=jnp.where(bad[:, None], jnp.nan, out.prior_logits),
        ), new_embedding

    return fn


@jit(static_argnames=("config", "sims", "max_nodes", "max_depth", "dirichlet_fraction",
                      "value_weighted"))
def _game_policy(forest, roots, keys, invalid, temperature, poison, *, config, sims,
                 max_nodes, max_depth, dirichlet_fraction, value_weighted):
    root = random_games.root(forest, roots)
    return jaxpuct.alphazero_policy(
        forest, keys, root, _poisoned(random_games.recurrent_fn, poison), sims,
        invalid_actions=invalid, max_depth=max_depth, max_nodes=max_nodes, selection=config,
        dirichlet_fraction=dirichlet_fraction, temperature=temperature,
        value_weighted=value_weighted)


def game_policy(forest, roots, keys, invalid, temperature, poison=-1, *, config, sims,
                max_nodes=None, max_depth=None, dirichlet_fraction=0.0, value_weighted=False):
    """``alphazero_policy`` on the random games of ``forest`` starting at ``roots [B]``.

    ``keys``: one key or ``[B, 2]`` keys; ``invalid [B, A]`` root actions not to take;
    ``temperature`` scalar or ``[B]``; ``poison``: a batch element whose network
    evaluations below the root are NaN (-1: none). Every call passes every argument
    the same way, so calls with equal shapes and hyper-parameters share one compiled
    search (``jit`` caches by the call's signature).
    """
    return _game_policy(forest, roots, keys, invalid, np.asarray(temperature, np.float32),
                        np.int32(poison), config=config, sims=sims, max_nodes=max_nodes,
                        max_depth=max_depth, dirichlet_fraction=dirichlet_fraction,
                        value_weighted=value_weighted)


def no_invalid(batch: int) -> np.ndarray:
    return np.zeros((batch, NUM_ACTIONS), bool)


def element_keys(seed: int, batch: int) -> jax.Array:
    """``[B, 2]`` uint32 keys, one per batch element."""
    return jax.random.split(jax.random.PRNGKey(seed), batch)


DEFAULT = PUCTConfig()
MCTX = PUCTConfig.mctx_muzero()

# A search with root noise, tie noise and sampling: compiled once for B = 4 (and
# B = 1, 3) and shared by the equality, policy and bad-input tests.
NOISY_SPEC = dict(config=PUCTConfig(tie_noise=0.05), sims=24, dirichlet_fraction=0.25)
NOISY_GAME = dict(prior_scale=1.0, value_noise=0.3, reward_mode="dense")
# Seeds whose root has every action legal (so that the root noise shows).
NOISY_SEEDS = [s for s in range(10, 100)
               if (random_games.random_game(s, NUM_ACTIONS, GAME_DEPTH, **NOISY_GAME).children[0]
                   >= 0).all()][:4]


# A tree that fills up (capacity 16 < 41 = sims + 1), and the same search with room.
FULL_SPEC = dict(config=MCTX, sims=40, max_nodes=16, dirichlet_fraction=0.25)
ROOMY_SPEC = dict(config=MCTX, sims=40, dirichlet_fraction=0.25)


def noisy_inputs(batch: int = 4):
    """``(forest, roots, invalid)`` for ``NOISY_SPEC``; element 1 may not play action 0."""
    forest, roots, _ = game_forest(NOISY_SEEDS[:batch], **NOISY_GAME)
    invalid = np.zeros((batch, NUM_ACTIONS), bool)
    invalid[1, 0] = True
    return forest, roots, invalid


# ------------------------------------------------------------------ tree checks


def check_tree(tree: jaxpuct.Tree, forest: random_games.RandomGame, roots: np.ndarray, sims: int,
               *, max_depth: int | None = None, root_legal: np.ndarray | None = None) -> None:
    """Structural invariants of a tree searched for ``sims`` simulations on ``forest``.

    ``root_legal [B, A]``: the root's legal actions (default: the game's).
    Checks ``jaxpuct.testing.check_tree(tree, sims)`` (slots below ``num_nodes``
    used, the others untouched; root visits ``sims + 1``; one parent edge per node,
    created after its parent; ``N(n, a) = N(child)``; no visited illegal edge; no
    visited edge without a child unless the tree is full), and, for every batch
    element:

    * every node is the game state its path leads to: embedding, reward and discount
      of its incoming move, terminal flag, raw value, prior, and ILLEGAL exactly at
      the game's illegal moves (and every move of a terminal node);
    * edges of terminal nodes have no visits;
    * ``N(n) = 1 + Σ_a N(n, a)`` for non-terminal nodes above ``max_depth`` and
      ``N(n, a) = N(child)`` for every link; nodes at ``max_depth`` keep their
      network value and are never expanded;
    * ``N(n) Q(n) = U(n) + Σ_a N(n, a) Q(n, a)`` (Q is the mean of the returns backed
      up through ``n``) unless an edge of ``n`` was visited without a stored child
      (a full tree);
    * every Q lies within the bounds of the returns the game allows below its node.
    """
    # Game-independent invariants (counts, links, capacity, unused slots).
    testing_checks.check_tree(tree, sims)
    t = jax.tree.map(np.asarray, tree)
    children_game = np.asarray(forest.children)
    lo_bound, hi_bound = forest_bounds(forest)
    batch, capacity, num_actions = t.children_index.shape
    depth_limit = capacity if max_depth is None else max_depth
    for b in range(batch):
        n = int(t.num_nodes[b])
        kids = t.children_index[b]
        game_node = t.embeddings[b]
        legal_root = (children_game[roots[b]] >= 0) if root_legal is None else root_legal[b]
        assert game_node[0] == roots[b]
        np.testing.assert_array_equal(kids[0] == ILLEGAL, ~legal_root)

        used = kids[:n]
        links = np.argwhere(used >= 0)
        depth = np.zeros(n, np.int64)
        for p, a in links:
            c = kids[p, a]
            depth[c] = depth[p] + 1
            g = children_game[game_node[p], a]
            assert g >= 0, "a stored child of an illegal move"
            assert game_node[c] == g
            assert t.node_rewards[b, c] == np.float32(forest.reward[game_node[p], a])
            assert t.node_discounts[b, c] == np.float32(forest.discount[game_node[p], a])
        assert depth.max() <= depth_limit

        for i in range(n):
            g = game_node[i]
            legal = legal_root if i == 0 else children_game[g] >= 0
            # A root with no legal action is never searched, like a terminal node.
            terminal = bool(forest.terminal[g]) or not legal.any()
            assert t.node_terminal[b, i] == terminal
            np.testing.assert_array_equal(kids[i] == ILLEGAL, ~legal)
            assert t.raw_values[b, i] == (0.0 if forest.terminal[g]
                                          else np.float32(forest.value[g]))
            prior = np.zeros(num_actions)
            if legal.any():
                logits = np.where(legal, np.asarray(forest.prior_logits[g], np.float64),
                                  -np.inf)
                prior = np.exp(logits - logits.max())
                prior /= prior.sum()
            np.testing.assert_allclose(t.children_prior[b, i], prior, rtol=1e-6, atol=1e-7)
            visits = t.edge_visits[b, i]
            childless_visits = np.any((kids[i] == UNEXPANDED) & (visits > 0))
            if terminal or not (kids[i] != ILLEGAL).any():
                assert visits.sum() == 0
                assert t.node_values[b, i] == t.raw_values[b, i]
                continue
            if depth[i] >= depth_limit:
                # Walks stop here and back up its (network) value, never averaged.
                assert visits.sum() == 0
                assert t.node_values[b, i] == t.raw_values[b, i]
                continue
            assert t.node_visits[b, i] == 1 + visits.sum()
            if not childless_visits:
                kid = kids[i]
                safe = np.maximum(kid, 0)
                q_edge = np.where(kid >= 0, t.node_rewards[b, safe]
                                  + t.node_discounts[b, safe] * t.node_values[b, safe], 0.0)
                total = t.raw_values[b, i] + np.sum(visits * q_edge.astype(np.float64))
                np.testing.assert_allclose(t.node_values[b, i] * t.node_visits[b, i], total,
                                           rtol=1e-5, atol=1e-4)
        q = t.node_values[b, :n]
        assert np.all(q >= lo_bound[game_node[:n]] - 1e-5), "Q below every possible return"
        assert np.all(q <= hi_bound[game_node[:n]] + 1e-5), "Q above every possible return"


# ------------------------------------------------------------------ a one-step bandit
# The bad-input and bad-value tests' smallest search: B = 2 roots, A = 3 actions.
BANDIT_B, BANDIT_A = 2, 3


def bandit_recurrent_fn(params, rng_key, action, embedding):
    """Single-agent, one step deep: action 0 pays 1, the others 0; then terminal."""
    del params, rng_key
    batch = action.shape[0]
    out = jaxpuct.RecurrentFnOutput(
        reward=jnp.where(action == 0, 1.0, 0.0), discount=jnp.ones(batch),
        prior_logits=jnp.zeros((batch, BANDIT_A)), value=jnp.zeros(batch),
        terminal=jnp.ones(batch, bool))
    return out, embedding + 1


def bandit_root(logits=None, batch=BANDIT_B, dtype=jnp.int32):
    """``[batch]`` roots with ``logits [batch, 3]`` (zeros by default)."""
    logits = jnp.zeros((batch, BANDIT_A)) if logits is None else jnp.asarray(logits, jnp.float32)
    return jaxpuct.RootFnOutput(prior_logits=logits, value=jnp.zeros(batch),
                                embedding=jnp.zeros(batch, dtype))
