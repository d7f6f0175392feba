"""Random finite games, solved exactly by backward induction.

Random trees (or DAGs, for graph search) with illegal actions, terminals at
varying depths and rewards on transitions, as arrays (:class:`RandomGame`), with:

* exact values and Q-values by backward induction (:func:`game_values`,
  :func:`game_qvalues`, :func:`optimal_actions`);
* a batched, jit-able ``recurrent_fn`` and :func:`root` fitting the
  mctx-compatible interface of :mod:`jaxpuct.types`; the game is the ``params``,
  so games padded to one size (:func:`pad_game`) share a compiled search, and a
  batch can play different games side by side (:func:`stack_games`).

Conventions are those of :mod:`jaxpuct.testing.tictactoe` (mctx and pgx): values
from the view of the player to move, rewards from the mover's, terminal states
have value 0 and no legal action; an illegal action ends the game with reward -1
for its mover, acting in a terminal state gives reward 0; both lead to the
absorbing dead state -1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.testing._common import RecurrentFn
from jaxpuct.types import RecurrentFnOutput, RootFnOutput

__all__ = [
    "RandomGame", "game_qvalues", "game_values", "make_recurrent_fn", "node_hash",
    "optimal_actions", "pad_game", "random_game", "recurrent_fn", "root", "stack_games",
    "step",
]


# The games are built and padded in NumPy, and searched as JAX arrays.
GameArray = jax.Array | np.ndarray


@pytree_dataclass
class RandomGame(Replaceable):
    """A finite game as arrays (a tree, or a DAG when nodes are merged); root = node 0.

    Node ids are topologically sorted: every child id is larger than its parent's.
    Pass it (NumPy or JAX arrays) as ``params`` to ``make_recurrent_fn``.

    Attributes:
      children: ``[N, A]`` int32 child node id, -1 where the action is illegal (every
        entry of a terminal node).
      reward: ``[N, A]`` float32 reward of the move, from the mover's view (0 where
        illegal).
      discount: ``[N, A]`` float32 discount of the move: -1 where the player to move
        changes, +1 (or gamma) where it does not.
      terminal: ``[N]`` bool.
      value: ``[N]`` float32 the leaf value the search is given (0, or a noisy
        exact value); 0 at terminal nodes.
      prior_logits: ``[N, A]`` float32 (zeros: uniform).
      depth: ``[N]`` int32 distance from the root (the shortest one in a DAG).
    """

    children: GameArray
    reward: GameArray
    discount: GameArray
    terminal: GameArray
    value: GameArray
    prior_logits: GameArray
    depth: GameArray

    @property
    def num_nodes(self) -> int:
        return int(self.children.shape[0])

    @property
    def num_actions(self) -> int:
        return int(self.children.shape[1])


def random_game(
    seed: int,
    num_actions: int = 3,
    depth: int = 4,
    *,
    legal_prob: float = 0.7,
    terminal_prob: float = 0.2,
    reward_mode: str = "terminal",
    discount: float = -1.0,
    extra_turn_prob: float = 0.0,
    merge_prob: float = 0.0,
    value_noise: float | None = None,
    prior_scale: float = 0.0,
    max_nodes: int = 100_000,
) -> RandomGame:
    """A random finite game, deterministic in its arguments.

    Built breadth-first from the root. Each action of a non-terminal node is legal
    with probability ``legal_prob`` (at least one always is). A node at depth
    ``1 <= d < depth`` is terminal with probability ``terminal_prob``; every node at
    depth ``depth`` is.

    Args:
      seed: NumPy seed.
      num_actions: ``A``.
      depth: maximum depth (number of moves) of the game.
      legal_prob: probability that an action is legal.
      terminal_prob: probability that a node above the maximum depth is terminal.
      reward_mode: ``"terminal"``: outcomes in {-1, 0, +1} on the moves into terminal
        nodes, 0 elsewhere (many exact ties); ``"dense"``: every move's reward is
        uniform in [-1, 1] (ties almost never occur, so the optimal action is unique).
      discount: of every move; -1 for a two-player zero-sum game, 1 or ``gamma`` for a
        single-agent one.
      extra_turn_prob: probability that a move keeps the same player to move
        (discount +1 instead of -1; only when ``discount == -1``).
      merge_prob: probability that a move leads to an existing node of the next depth
        instead of a new one: transpositions, for graph search.
      value_noise: ``None``: value 0 everywhere; ``sigma``: the exact value plus
        ``N(0, sigma^2)`` noise at non-terminal nodes (``0.0``: a perfect evaluator).
      prior_scale: prior logits are ``prior_scale * N(0, 1)`` (0: uniform).
      max_nodes: raise ``ValueError`` rather than build a larger game.
    """
    if reward_mode not in ("terminal", "dense"):
        raise ValueError(f"unknown reward_mode {reward_mode!r}")
    rng = np.random.default_rng(seed)
    children: list[np.ndarray] = []
    rewards: list[np.ndarray] = []
    discounts: list[np.ndarray] = []
    terminal = [False]
    depths = [0]
    by_depth: dict[int, list[int]] = {0: [0]}
    node = 0
    while node < len(terminal):
        kids = np.full(num_actions, -1, np.int32)
        rew = np.zeros(num_actions, np.float32)
        disc = np.zeros(num_actions, np.float32)
        if not terminal[node]:
            legal = rng.random(num_actions) < legal_prob
            if not legal.any():
                legal[rng.integers(num_actions)] = True
            d = depths[node] + 1
            for a in np.flatnonzero(legal):
                existing = by_depth.get(d, [])
                if existing and rng.random() < merge_prob:
                    child = int(existing[rng.integers(len(existing))])
                else:
                    child = len(terminal)
                    if child >= max_nodes:
                        raise ValueError(f"game exceeds max_nodes={max_nodes}")
                    terminal.append(d >= depth or bool(rng.random() < terminal_prob))
                    depths.append(d)
                    by_depth.setdefault(d, []).append(child)
                kids[a] = child
                if reward_mode == "dense":
                    rew[a] = rng.uniform(-1.0, 1.0)
                elif terminal[child]:
                    rew[a] = rng.integers(-1, 2)
                extra_turn = discount == -1.0 and rng.random() < extra_turn_prob
                disc[a] = 1.0 if extra_turn else discount
        children.append(kids)
        rewards.append(rew)
        discounts.append(disc)
        node += 1
    n = len(terminal)
    game = RandomGame(
        children=np.stack(children),
        reward=np.stack(rewards),
        discount=np.stack(discounts),
        terminal=np.asarray(terminal, bool),
        value=np.zeros(n, np.float32),
        prior_logits=(prior_scale * rng.standard_normal((n, num_actions))).astype(np.float32),
        depth=np.asarray(depths, np.int32),
    )
    if value_noise is not None:
        exact = game_values(game)
        noisy = exact + value_noise * rng.standard_normal(n)
        game = game.replace(value=np.where(game.terminal, 0.0, noisy).astype(np.float32))
    return game


def game_qvalues(game: RandomGame) -> np.ndarray:
    """``[N, A]`` float64 exact ``Q(n, a) = r + discount * V(child)``; -inf where illegal.

    Backward induction (Zermelo 1913; von Neumann & Morgenstern 1944) in the negamax
    form: one sweep over the nodes in reverse topological (id) order.
    """
    children = np.asarray(game.children)
    legal = children >= 0
    ids = np.arange(children.shape[0])[:, None]
    if np.any(legal & (children <= ids)):
        raise ValueError("node ids are not topologically sorted")
    reward = np.asarray(game.reward, np.float64)
    discount = np.asarray(game.discount, np.float64)
    values = np.zeros(children.shape[0])
    q = np.full(children.shape, -np.inf)
    for n in range(children.shape[0] - 1, -1, -1):
        acts = np.flatnonzero(legal[n])
        if acts.size:
            q[n, acts] = reward[n, acts] + discount[n, acts] * values[children[n, acts]]
            values[n] = q[n, acts].max()
    return q


def game_values(game: RandomGame) -> np.ndarray:
    """``[N]`` float64 exact value of every node for its player to move; 0 if terminal."""
    q = game_qvalues(game)
    has_move = np.isfinite(q).any(axis=1)
    return np.where(has_move, np.max(q, axis=1, initial=-np.inf), 0.0)


def optimal_actions(game: RandomGame, node: int = 0,
                                atol: float = 1e-6) -> set[int]:
    """The actions at ``node`` whose exact Q is within ``atol`` of the best."""
    q = game_qvalues(game)[node]
    if not np.isfinite(q).any():
        return set()
    return {int(a) for a in np.flatnonzero(q >= q.max() - atol)}


def pad_game(game: RandomGame, num_nodes: int) -> RandomGame:
    """``game`` with unreachable terminal nodes appended up to ``num_nodes``.

    Games padded to one size share a compiled search.
    """
    extra = num_nodes - game.num_nodes
    if extra < 0:
        raise ValueError(f"game has {game.num_nodes} nodes > {num_nodes}")

    def pad(x: GameArray, fill: Any) -> np.ndarray:
        x = np.asarray(x)
        return np.concatenate([x, np.full((extra,) + x.shape[1:], fill, x.dtype)])

    return RandomGame(
        children=pad(game.children, -1), reward=pad(game.reward, 0),
        discount=pad(game.discount, 0), terminal=pad(game.terminal, True),
        value=pad(game.value, 0), prior_logits=pad(game.prior_logits, 0),
        depth=pad(game.depth, 0),
    )


def stack_games(games: Sequence[RandomGame]) -> tuple[RandomGame, np.ndarray]:
    """One game holding ``games`` side by side, and ``[G]`` int32 their root ids.

    For a batch whose elements play different games:
    ``root(forest, roots)``. All games must share ``num_actions``.
    """
    sizes = np.array([g.num_nodes for g in games])
    roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    children = [np.where(np.asarray(g.children) >= 0, np.asarray(g.children) + r, -1)
                for g, r in zip(games, roots, strict=True)]

    def cat(field: str) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(g, field)) for g in games])

    forest = RandomGame(
        children=np.concatenate(children).astype(np.int32), reward=cat("reward"),
        discount=cat("discount"), terminal=cat("terminal"), value=cat("value"),
        prior_logits=cat("prior_logits"), depth=cat("depth"),
    )
    return forest, roots


def node_hash(node: jax.Array) -> jax.Array:
    """``[B, 2]`` uint32 hash of node ids ``[B]``: exact, so transpositions are exactly
    the merged nodes (the dead state -1 maps to ``[2**32 - 1, 1]``)."""
    node = jnp.asarray(node, jnp.int32)
    return jnp.stack([node.astype(jnp.uint32), (node < 0).astype(jnp.uint32)], axis=-1)


def root(game: RandomGame, roots: int | jax.Array,
                     *, with_hash: bool = False) -> RootFnOutput:
    """Root of a search in ``game``.

    Args:
      game: the game (NumPy or JAX arrays).
      roots: a batch size ``B`` (every element starts at node 0; a Python int, so
        static under ``jit``), or ``[B]`` node ids.
      with_hash: include :func:`node_hash`.

    Returns:
      embedding = the node ids ``[B]`` int32, the game's prior logits and value, and
      the legal mask.
    """
    if isinstance(roots, int):
        roots = jnp.zeros((roots,), jnp.int32)
    node = jnp.asarray(roots, jnp.int32)
    children = jnp.asarray(game.children)[node]
    return RootFnOutput(
        prior_logits=jnp.asarray(game.prior_logits)[node],
        value=jnp.asarray(game.value)[node],
        embedding=node,
        legal_action_mask=children >= 0,
        state_hash=node_hash(node) if with_hash else None,
    )


def step(game: RandomGame, node: jax.Array, action: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Plays ``action [B]`` at ``node [B]``.

    Returns ``(child [B], reward [B], discount [B], terminal [B])``. An illegal action
    at a non-terminal node ends the game with reward -1 for the mover; acting in a
    terminal node gives reward 0; both lead to the dead state -1, which is terminal
    and absorbing. Its discount is 1 (irrelevant: its value is 0).
    """
    node = jnp.asarray(node, jnp.int32)
    alive = node >= 0
    safe = jnp.maximum(node, 0)  # -1 would wrap around in a gather
    terminal_arr = jnp.asarray(game.terminal)
    child = jnp.where(alive, jnp.asarray(game.children)[safe, action], -1)
    moved = child >= 0
    illegal = alive & ~moved & ~terminal_arr[safe]
    reward = jnp.where(moved, jnp.asarray(game.reward)[safe, action],
                       jnp.where(illegal, -1.0, 0.0)).astype(jnp.float32)
    discount = jnp.where(moved, jnp.asarray(game.discount)[safe, action], 1.0)
    terminal = jnp.where(moved, terminal_arr[jnp.maximum(child, 0)], True)
    return child, reward, discount.astype(jnp.float32), terminal


def make_recurrent_fn(*, with_hash: bool = False) -> RecurrentFn:
    """A ``recurrent_fn(params=game, rng_key, action [B], node [B])`` for random games.

    The game is ``params`` (so games padded to one size share a compilation);
    ``rng_key`` is ignored. Outputs the game's prior logits and value at the new node
    (0 at terminal ones), its legal mask, terminal flag, and the move's reward and
    discount (see :func:`step`).
    """

    def recurrent_fn(params: RandomGame, rng_key: jax.Array, action: jax.Array,
                     embedding: jax.Array) -> tuple[RecurrentFnOutput, jax.Array]:
        del rng_key
        child, reward, discount, terminal = step(params, embedding, action)
        safe = jnp.maximum(child, 0)
        alive = child >= 0
        out = RecurrentFnOutput(
            reward=reward,
            discount=discount,
            prior_logits=jnp.where(alive[:, None], jnp.asarray(params.prior_logits)[safe], 0.0),
            value=jnp.where(alive & ~terminal, jnp.asarray(params.value)[safe], 0.0),
            legal_action_mask=alive[:, None] & (jnp.asarray(params.children)[safe] >= 0),
            terminal=terminal,
            state_hash=node_hash(child) if with_hash else None,
        )
        return out, child

    return recurrent_fn


recurrent_fn = make_recurrent_fn()
