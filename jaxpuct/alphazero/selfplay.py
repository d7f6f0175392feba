"""Lockstep batch self-play as pure functions.

:func:`selfplay_step` advances ``B`` games by one move together: a search with
Dirichlet noise at the root (temperature 1 for the first ``temperature_moves``
plies of each game, per game, and 0 after -- the AlphaZero recipe, Silver et al.
2018, "A general reinforcement learning algorithm that masters chess, shogi, and
Go through self-play", supplementary materials), then the trajectory bookkeeping
(:func:`record_ply`), the outcome of every stored position once a game ends
(:func:`position_outcomes`), the buffer write
(:func:`jaxpuct.alphazero.buffer.write_trajectories`) and the in-place restart of
finished games (:func:`restart_finished`). Everything is a pure function of
explicit pytrees, so one ``jax.jit`` holds the search, the network and the rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct._dataclass import Replaceable, mutable_pytree_dataclass
from jaxpuct.alphazero.buffer import ReplayBuffer, write_trajectories
from jaxpuct.alphazero.config import SelfPlayConfig
from jaxpuct.envs.adapter import Environment, make_recurrent_fn, make_root_fn
from jaxpuct.final_move import visit_policy
from jaxpuct.gumbel import CompletedQConfig, gumbel_policy
from jaxpuct.numerics import batch_where
from jaxpuct.policies import alphazero_policy
from jaxpuct.reuse import subtree
from jaxpuct.roots import init_tree
from jaxpuct.sampled import SampledPolicyOutput, sampled_policy
from jaxpuct.selection import PUCTConfig
from jaxpuct.solver import pruned_root_visits, solver_config, with_proofs
from jaxpuct.testing.pure_search import zero_apply
from jaxpuct.tree import Tree, present
from jaxpuct.types import PolicyOutput

__all__ = ["Games", "SearchFns", "dense_weights", "fresh_tree", "init_games", "make_search_fns",
           "position_outcomes", "record_ply", "restart_finished", "search", "selfplay_step",
           "visit_target", "with_random_openings"]


@mutable_pytree_dataclass
class Games(Replaceable):
    """``B`` games in progress and their trajectories so far.

    Attributes:
      state: the pgx states ``[B, ...]``.
      obs: ``[B, T, ...]`` observation at each ply played.
      policy: ``[B, T, A]`` search policy at each ply.
      player: ``[B, T]`` int32 pgx player id to move at each ply.
      length: ``[B]`` int32 plies played so far.
      tree: with ``reuse_tree``, each game's search tree rooted at its current
        position (``jaxpuct.Tree``, ``[B, N, ...]``); else ``None``.
      tree_valid: ``[B]`` bool, where ``tree`` holds a reused subtree (a new
        game, or a move that left the old tree, starts afresh).
      root_value: with ``value_target_mix > 0``, ``[B, T]`` float32 search value
        of the root at each ply (player to move's view); else ``None``.
    """

    state: Any
    obs: jax.Array
    policy: jax.Array
    player: jax.Array
    length: jax.Array
    tree: Any = None
    tree_valid: Any = None
    root_value: Any = None


@dataclasses.dataclass(frozen=True)
class SearchFns:
    """The static pieces a search needs (closed over by ``jax.jit``).

    Attributes:
      config: the run's configuration.
      env: the game's :class:`jaxpuct.envs.adapter.Environment`.
      root_fn: ``(params, key, state) -> RootFnOutput`` with the network.
      recurrent_fn: the search's step function with the network.
      policy: ``"alphazero"``, ``"gumbel"`` or ``"sampled"`` (a pure search is
        always ``"alphazero"``).
      selection: the PUCT search's rule (default: ``alphazero_policy``'s, AlphaZero's);
        the arena's pure searches take UCT (:meth:`PUCTConfig.uct`).
    """

    config: SelfPlayConfig
    env: Environment
    root_fn: Callable
    recurrent_fn: Callable
    policy: str = "alphazero"
    selection: PUCTConfig = PUCTConfig()


_ROOT_KEY_STREAM = 0x5E7  # fold_in data: any constant other streams do not use


def make_search_fns(config: SelfPlayConfig, env: Environment, apply_fn: Callable | None,
                    num_actions: int) -> SearchFns:
    """Search functions of ``apply_fn(params, obs) -> (logits [B, A], value [B])``
    with ``A = num_actions``, evaluated under ``config.search_symmetry``; ``None``:
    a pure search (uniform prior, zero value)."""
    policy, pure = config.policy, apply_fn is None
    if apply_fn is None:
        apply_fn, policy = zero_apply(num_actions), "alphazero"
    # The zero network is the same under every symmetry: none is applied to it.
    if config.search_symmetry == "none" or pure:
        root_fn, recurrent_fn = make_root_fn(apply_fn, env), make_recurrent_fn(apply_fn, env)
    else:
        from jaxpuct.envs import symmetries
        from jaxpuct.envs.pgx_games import symmetries as game_symmetries
        table, mode = game_symmetries(config.game), config.search_symmetry
        root_fn = symmetries.make_root_fn(apply_fn, env, table, mode=mode)
        recurrent_fn = symmetries.make_recurrent_fn(apply_fn, env, table, mode=mode)
    return SearchFns(config=config, env=env, root_fn=root_fn, recurrent_fn=recurrent_fn,
                     policy=policy)


def fresh_tree(config: SelfPlayConfig, root: Any) -> Any:
    """A new tree for ``root`` (``RootFnOutput``, ``[B]``) with the search's
    capacity, graph table and, with ``config.solver``, its proof array: the same
    structure as the trees the search returns, so a reused tree and a fresh one
    can be selected between per game."""
    tree = init_tree(root, config.capacity, graph=config.graph)
    return with_proofs(tree) if config.solver else tree


def search(fns: SearchFns, params: Any, keys: jax.Array, state: Any, *,
           dirichlet_fraction: float, temperature: jax.Array, tree: Any = None,
           tree_valid: jax.Array | None = None):
    """One search per game (``keys [B]``, ``temperature [B]``); returns the
    ``PolicyOutput``. With ``tree``, games where ``tree_valid`` continue their
    reused tree and the others start from a fresh root.

    Gumbel search has no Dirichlet noise nor temperature: games with
    ``temperature > 0`` get Gumbel noise of scale ``gumbel_scale``, the others
    none (a deterministic search), and ``action_weights`` is the improved policy.

    The sampled search returns its weights over the root's ``num_samples``
    samples scattered to ``[B, A]`` (zero at the actions not drawn): the
    cross-entropy with that target is Hubert et al.'s sampled policy loss
    ``-Σ_k w_k log π(a_k)`` (:func:`jaxpuct.sampled_policy_loss`), so the buffer
    and the loss stay those of the other policies.
    """
    c = fns.config
    # At temperature 0 the move and the (one-hot) target are the most visited
    # action, which early stopping keeps.
    early_stop = (temperature == 0) if c.early_stop else False
    # root_fn gets a stream of its own, not the first game's search key (its
    # Dirichlet noise and walks); a root_fn that ignores its key costs nothing (the
    # unused fold_in is dead code to XLA).
    root = fns.root_fn(params, jax.random.fold_in(keys[0], _ROOT_KEY_STREAM), state)
    if tree is not None:
        fresh = fresh_tree(c, root)
        tree = batch_where(present(tree_valid, "tree_valid"), tree, fresh)
    visits = c.policy_target == "visits"
    if fns.policy == "sampled":
        out = sampled_policy(
            params, keys, root, fns.recurrent_fn, c.num_simulations,
            num_samples=c.num_samples, dirichlet_fraction=dirichlet_fraction,
            dirichlet_alpha=c.dirichlet_alpha, temperature=temperature, max_nodes=c.capacity,
            early_stop=early_stop)
        if visits:
            out = out.replace(action_weights=visit_target(out.search_tree))
        return PolicyOutput(action=out.action, search_tree=out.search_tree,
                            action_weights=dense_weights(out, root.prior_logits.shape[-1]))
    if fns.policy == "gumbel":
        return gumbel_policy(
            params, keys, root, fns.recurrent_fn, c.num_simulations,
            max_num_considered_actions=c.considered_actions,
            gumbel_scale=jnp.where(temperature > 0, c.gumbel_scale, 0.0),
            qtransform=CompletedQConfig(value_scale=c.value_scale,
                                        maxvisit_init=c.maxvisit_init),
            max_nodes=c.capacity, graph=c.graph, tree=tree, solver=c.solver)
    out = alphazero_policy(
        params, keys, root, fns.recurrent_fn, c.num_simulations,
        selection=fns.selection,
        dirichlet_fraction=dirichlet_fraction, dirichlet_alpha=c.dirichlet_alpha,
        temperature=temperature, max_nodes=c.capacity, graph=c.graph, tree=tree,
        solver=c.solver, early_stop=early_stop)
    if visits:
        out = out.replace(action_weights=visit_target(out.search_tree, c.solver))
    return out


def visit_target(tree: Tree, solver: bool = False) -> jax.Array:
    """The root's visit distribution ``N(a) / sum N``, whatever the move's temperature.

    AlphaZero's pseudocode stores these as the policy target at every ply (its
    ``store_search_statistics``), as mctx's ``action_weights`` are; the move may be
    drawn at another temperature. With ``solver``, the dominated proven moves'
    visits are left out, as :func:`jaxpuct.alphazero_policy`'s target leaves them.

    Args:
      tree: the search's tree, ``[B, N, ...]`` (a sampled search's: its root
        slots ``[B, K]`` stand for the actions).

    Returns:
      ``[B, A]`` (or ``[B, K]``) float32, rows summing to 1 where the root was
      visited, all zeros where it was not.
    """
    config = solver_config(solver)
    counts = (tree.edge_visits[:, Tree.ROOT_INDEX] if config is None
              else pruned_root_visits(tree, config))
    return visit_policy(counts, 1.0)


def dense_weights(out: SampledPolicyOutput, num_actions: int) -> jax.Array:
    """``[B, A]``: a sampled search's ``action_weights [B, K]`` at its
    ``sampled_actions [B, K]`` ids (distinct where the weight is positive; the
    unfilled slots' placeholder ids carry weight 0)."""
    rows = jnp.arange(out.action_weights.shape[0])[:, None]
    ids = jnp.clip(out.sampled_actions, 0, num_actions - 1)
    return jnp.zeros((out.action_weights.shape[0], num_actions), jnp.float32).at[
        rows, ids].add(out.action_weights.astype(jnp.float32))


def init_games(config: SelfPlayConfig, init_fn: Callable, key: jax.Array,
               obs_shape: tuple[int, ...], obs_dtype, num_actions: int) -> Games:
    """``B`` new games (``init_fn(key, B)`` -> pgx states) with empty trajectories."""
    b, t = config.batch_size, config.trajectory_length
    return Games(state=init_fn(key, b),
                 obs=jnp.zeros((b, t, *obs_shape), obs_dtype),
                 policy=jnp.zeros((b, t, num_actions), jnp.float32),
                 player=jnp.zeros((b, t), jnp.int32),
                 length=jnp.zeros((b,), jnp.int32),
                 root_value=(jnp.zeros((b, t), jnp.float32) if config.value_target_mix > 0
                             else None))


def record_ply(games: Games, obs: jax.Array, policy: jax.Array, player: jax.Array,
               root_value: jax.Array | None = None) -> Games:
    """Stores this ply's ``obs [B, ...]``, ``policy [B, A]``, ``player [B]`` (and
    ``root_value [B]`` where the games keep it) at each game's current length
    (the last slot for a game at the length limit)."""
    b, t = games.player.shape
    slot = jnp.minimum(games.length, t - 1)
    rows = jnp.arange(b)
    kept = games.root_value
    if kept is not None:
        kept = kept.at[rows, slot].set(present(root_value, "root_value").astype(kept.dtype))
    return games.replace(obs=games.obs.at[rows, slot].set(obs.astype(games.obs.dtype)),
                         policy=games.policy.at[rows, slot].set(policy),
                         player=games.player.at[rows, slot].set(player.astype(jnp.int32)),
                         length=games.length + 1, root_value=kept)


def position_outcomes(rewards: jax.Array, player: jax.Array, terminal: jax.Array
                      ) -> jax.Array:
    """``[B, T]`` result for the player to move at each stored position.

    Args:
      rewards: ``[B, 2]`` final rewards by pgx player id.
      player: ``[B, T]`` player id to move at each ply.
      terminal: ``[B]`` whether the game ended by its rules (a game cut off at the
        length limit is scored a draw).
    """
    outcome = jnp.take_along_axis(rewards.astype(jnp.float32), player, axis=1)
    return jnp.where(terminal[:, None], outcome, 0.0)


_OPENING_KEY_STREAM = 0x0BE7  # fold_in data: keeps the openings' draws off pgx's own
_OPENING_SHARE_STREAM = 0x05A4  # and the draw of whether a game gets an opening at all


def with_random_openings(env: Environment, fresh_fn: Callable, max_moves: int,
                         share: float = 1.0) -> Callable:
    """``fresh_fn`` (``keys [B] -> states [B]``) whose games first play random moves.

    Each game, with probability ``share`` (else ``k = 0``), draws ``k`` uniformly
    from ``0..max_moves`` and plays ``k`` moves, each uniform over its legal moves;
    a move that would end the game is skipped (the game stays where it was for
    that ply), so every returned game is live. Self-play then starts from
    positions it would seldom reach by itself, as opening books and KataGo's
    randomised openings (Wu 2019, "Accelerating Self-Play Learning in Go") widen
    what a network sees; a ``share`` below 1 keeps part of the games on the lines
    that play from the initial position reaches. ``max_moves == 0`` or
    ``share == 0`` returns ``fresh_fn`` itself.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    if max_moves == 0 or share == 0.0:
        return fresh_fn

    def fresh(keys: jax.Array) -> Any:
        state = fresh_fn(keys)
        # Every uniform drawn before the loop, in one call per game: a categorical
        # draw inside it would run the threefry hash at each ply, as rollouts avoid
        # (jaxpuct.envs.rollouts). Column 0 is the count, column t the ply-t move.
        u = jax.vmap(lambda k: jax.random.uniform(
            jax.random.fold_in(k, _OPENING_KEY_STREAM), (max_moves + 1,)))(keys)
        count = jnp.minimum(jnp.floor(u[:, 0] * (max_moves + 1)).astype(jnp.int32), max_moves)
        if share < 1.0:
            # A stream of its own: share 1 draws exactly the openings it drew before.
            opened = jax.vmap(lambda k: jax.random.uniform(
                jax.random.fold_in(k, _OPENING_SHARE_STREAM)))(keys) < share
            count = jnp.where(opened, count, 0)

        def one_ply(state, ply_and_u):
            ply, u_ply = ply_and_u
            # Inverse CDF over the legal moves: the first whose running count
            # exceeds u times their number.
            cumulative = jnp.cumsum(env.legal_mask(state).astype(jnp.float32), axis=-1)
            action = jnp.argmax(cumulative > u_ply[:, None] * cumulative[:, -1:], axis=-1)
            moved = env.step(state, action.astype(jnp.int32))
            keep = (ply <= count) & ~env.terminal(moved)
            return batch_where(keep, moved, state), None

        state, _ = jax.lax.scan(one_ply, state, (jnp.arange(1, max_moves + 1), u[:, 1:].T))
        return state

    return fresh


def restart_finished(fresh: Any, state: Any, finished: jax.Array) -> Any:
    """``state [B, ...]`` with the games where ``finished`` replaced by ``fresh``."""
    return batch_where(finished, fresh, state)


def selfplay_step(fns: SearchFns, fresh_fn: Callable, params: Any, games: Games,
                  buffer: ReplayBuffer, rng: jax.Array
                  ) -> tuple[Games, ReplayBuffer, dict[str, jax.Array]]:
    """One move of every game; finished games go to the buffer and restart.

    Args:
      fns: the search with the network.
      fresh_fn: ``keys [B] -> pgx states [B]`` of new games.
      params: network parameters (the newest network plays).
      games, buffer: the current games and buffer (may be donated).
      rng: this step's key.

    Returns:
      ``(games, buffer, metrics)``; metrics are ``[]`` counts over the games that
      ended now.
    """
    c, env = fns.config, fns.env
    b, t = c.batch_size, c.trajectory_length
    search_keys, init_keys = jnp.split(jax.random.split(rng, 2 * b), 2)
    temperature = jnp.where(games.length < c.temperature_moves, 1.0, 0.0)
    out = search(fns, params, search_keys, games.state,
                 dirichlet_fraction=c.dirichlet_fraction, temperature=temperature,
                 tree=games.tree, tree_valid=games.tree_valid)
    # A game whose root has no legal move cannot be live (it would have ended),
    # but keep the action legal for the environment anyway.
    action = jnp.maximum(out.action, 0)
    games = record_ply(games, env.observe(games.state), out.action_weights,
                       games.state.current_player,
                       out.search_tree.node_values[:, out.search_tree.ROOT_INDEX])
    new_state = env.step(games.state, action)
    terminal = env.terminal(new_state)
    # A game longer than the trajectory is cut off there and scored a draw.
    finished = terminal | (games.length >= t)
    outcome = position_outcomes(new_state.rewards, games.player, terminal)
    written = finished[:, None] & (jnp.arange(t)[None, :] < games.length[:, None])
    buffer = write_trajectories(buffer, games.obs, games.policy, outcome, written,
                                games.root_value)

    tree, tree_valid, inherited = None, None, jnp.zeros((), jnp.int32)
    unstored = out.search_tree.unstored_leaves()
    if games.tree is not None:
        inherited = jnp.sum(jnp.where(games.tree_valid, games.tree.node_visits[:, 0] - 1, 0))
        # Only this move's search: the reused subtree's own unstored leaves are older.
        unstored = unstored - jnp.where(games.tree_valid, games.tree.unstored_leaves(), 0)
        tree, reused = subtree(out.search_tree, action, graph=c.graph)
        tree_valid = reused & ~finished
    # The mover of the first stored ply: after a random opening, not always the game's.
    first_reward = jnp.take_along_axis(new_state.rewards, games.player[:, :1], axis=1)[:, 0]
    saved = out.search_tree.summary().simulations_saved
    metrics = {
        "games_finished": jnp.sum(finished),
        "first_player_wins": jnp.sum(finished & (first_reward > 0)),
        "draws": jnp.sum(finished & (first_reward == 0)),
        "plies_finished": jnp.sum(jnp.where(finished, games.length, 0)),
        "inherited_visits": inherited,
        "unstored_leaves": jnp.sum(unstored),
        "simulations_saved": jnp.zeros((), jnp.int32) if saved is None else jnp.sum(saved),
    }
    games = games.replace(state=restart_finished(fresh_fn(init_keys), new_state, finished),
                          length=jnp.where(finished, 0, games.length), tree=tree,
                          tree_valid=tree_valid)
    return games, buffer, metrics
