"""Batch self-play, a replay buffer and training for AlphaZero-style learning.

The pieces, all pure functions of explicit pytrees so that one ``jax.jit`` holds
the search, the network and the environment:

* :class:`ReplayBuffer`: a fixed-size circular pytree of ``(observation,
  search policy, outcome, valid)`` rows.
* :class:`Games`: ``B`` games in progress, each with its trajectory so far
  (observations, search policies and the id of the player to move, per ply).
* :meth:`Trainer.selfplay_step`: advances the ``B`` games by one move in
  lockstep -- search with Dirichlet noise at the root, temperature 1 for the
  first ``temperature_moves`` plies of each game (per game, so games at
  different plies share one batch) and 0 after -- and, for every game that
  ended, writes its trajectory to the buffer with the outcome from the view of
  the player to move at each position, then restarts that game in place.
* :meth:`Trainer.train_step`: one optax step (adam, or sgd with momentum) on a
  minibatch sampled from the buffer: policy cross-entropy + value MSE + L2
  weight decay.
* :meth:`Trainer.play_vs`: greedy evaluation games, as both colours, against a
  uniform random player or a pure search (uniform prior, zero value, the same
  number of simulations).
* :func:`save_checkpoint` / :func:`restore_checkpoint`: the whole
  :class:`TrainState` (network, optimiser state, buffer, games in progress,
  iteration, RNG) with orbax; a corrupt or mismatched checkpoint raises
  :class:`CheckpointError` naming the directory and the problem.

The newest network plays: the self-play step reads the parameters that the last
train step produced.

Devices. :class:`Trainer` builds a ``jax.sharding.Mesh`` over all local devices
with one axis ``"batch"``; the games (every leaf of :class:`Games`, leading axis
``B``) are placed with ``NamedSharding(mesh, P("batch"))`` and everything else
(network, optimiser state, buffer, RNG) is replicated. ``jax.jit`` partitions
the search over the batch axis, and the train step's loss is a mean over a
global minibatch, so its gradient is the all-device average (the partitioner
inserts the all-reduce). The same code runs on one CPU (a mesh of one device).
``B`` must be a multiple of the number of devices.

Multi-host. Call ``jax.distributed.initialize()`` (coordinator address, number
of processes and process id from the cluster environment, or explicitly) in
every process before anything else touches JAX; then ``jax.devices()`` lists the
devices of all hosts, build the mesh over them with
``Trainer(config, devices=jax.devices())``, and every process runs the same
program (SPMD). Each host then holds its shard of the games;
orbax's ``CheckpointManager`` writes a multi-host checkpoint when all processes
call :func:`save_checkpoint` with the same directory (a shared file system).
Only the single-host path is tested here (on CPU with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Sequence
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxpuct.alphazero import networks
from jaxpuct.envs.adapter import make_recurrent_fn, make_root_fn
from jaxpuct.graph import GraphConfig
from jaxpuct.policies import alphazero_policy
from jaxpuct.reuse import subtree
from jaxpuct.search import init_tree

__all__ = [
    "CheckpointError",
    "Games",
    "OPTIMIZERS",
    "NETWORKS",
    "ReplayBuffer",
    "SelfPlayConfig",
    "TrainState",
    "Trainer",
    "restore_checkpoint",
    "save_checkpoint",
]

OPTIMIZERS = ("adam", "sgd")
NETWORKS = ("mlp", "resnet")
# Longest game per pgx game (pgx's own limits; go: 9 * 9 * 2 moves).
MAX_MOVES = {"tic_tac_toe": 9, "connect_four": 42, "othello": 130, "go_9x9": 162}


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    """Everything that decides a run (static; hashable; saved with checkpoints).

    Attributes:
      game: a pgx game of :data:`jaxpuct.envs.pgx_games.PGX_GAMES`.
      batch_size: ``B``, games played in lockstep (a multiple of the devices).
      num_simulations: simulations per search.
      temperature_moves: plies of each game played with temperature 1 (then 0).
      dirichlet_alpha, dirichlet_fraction: root noise in self-play.
      max_moves: trajectory length kept per game (default: the game's limit).
      buffer_size: replay buffer rows (at least ``B * max_moves``).
      train_batch_size: minibatch rows per train step.
      optimizer: ``"adam"`` or ``"sgd"`` (with ``momentum``).
      learning_rate, momentum, weight_decay: optimiser settings (weight decay
        is an L2 penalty on the weight matrices, added to the loss).
      lr_decay_steps: ``0`` for a constant learning rate, else a cosine decay
        to 5% of it over this many train steps (constant after).
      value_weight: weight of the value MSE in the loss.
      network: ``"mlp"`` or ``"resnet"``.
      hidden: MLP layer widths.
      blocks, channels: ResNet size.
      reuse_tree: keep the subtree under the move played as the next search's
        starting tree (AlphaGo's reuse; new simulations add to what is there).
      graph_search: Monte-Carlo graph search (transpositions share a node),
        with the pgx adapter's Zobrist hash.
      max_nodes: tree capacity; 0 picks ``num_simulations + 1``, or twice the
        simulations with ``reuse_tree`` (a full tree still backs up values).
      seed: the run's RNG seed.
    """

    game: str = "tic_tac_toe"
    batch_size: int = 128
    num_simulations: int = 32
    temperature_moves: int = 3
    dirichlet_alpha: float = 1.0
    dirichlet_fraction: float = 0.25
    max_moves: int | None = None
    buffer_size: int = 8192
    train_batch_size: int = 256
    optimizer: str = "adam"
    learning_rate: float = 2e-3
    lr_decay_steps: int = 0
    momentum: float = 0.9
    weight_decay: float = 1e-4
    value_weight: float = 1.0
    network: str = "mlp"
    hidden: tuple[int, ...] = (128, 128)
    blocks: int = 4
    channels: int = 32
    reuse_tree: bool = False
    graph_search: bool = False
    max_nodes: int = 0
    seed: int = 0

    def __post_init__(self):
        from jaxpuct.envs.pgx_games import PGX_GAMES
        if self.game not in PGX_GAMES:
            raise ValueError(f"unknown game {self.game!r}; accepted: {', '.join(PGX_GAMES)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; accepted: "
                             f"{', '.join(OPTIMIZERS)}")
        if self.network not in NETWORKS:
            raise ValueError(f"unknown network {self.network!r}; accepted: "
                             f"{', '.join(NETWORKS)}")
        for name in ("batch_size", "num_simulations", "buffer_size", "train_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.max_nodes, int) or self.max_nodes < 0:
            raise ValueError(f"max_nodes must be an int >= 0 (0: automatic), got "
                             f"{self.max_nodes!r}")
        if not isinstance(self.lr_decay_steps, int) or self.lr_decay_steps < 0:
            raise ValueError(f"lr_decay_steps must be an int >= 0, got {self.lr_decay_steps!r}")
        if self.max_moves is not None and self.max_moves < 1:
            raise ValueError(f"max_moves must be >= 1, got {self.max_moves!r}")
        if self.temperature_moves < 0:
            raise ValueError(f"temperature_moves must be >= 0, got {self.temperature_moves}")
        if not self.dirichlet_alpha > 0 or not 0 <= self.dirichlet_fraction <= 1:
            raise ValueError("need dirichlet_alpha > 0 and 0 <= dirichlet_fraction <= 1")
        if not self.learning_rate > 0 or self.weight_decay < 0:
            raise ValueError("need learning_rate > 0 and weight_decay >= 0")
        if self.buffer_size < self.batch_size * self.trajectory_length:
            raise ValueError(
                f"buffer_size ({self.buffer_size}) must be at least batch_size * max_moves "
                f"= {self.batch_size} * {self.trajectory_length} = "
                f"{self.batch_size * self.trajectory_length}")

    @property
    def capacity(self) -> int:
        if self.max_nodes:
            return self.max_nodes
        return (2 if self.reuse_tree else 1) * self.num_simulations + 1

    @property
    def graph(self) -> GraphConfig | None:
        return GraphConfig() if self.graph_search else None

    @property
    def trajectory_length(self) -> int:
        return self.max_moves if self.max_moves is not None else MAX_MOVES[self.game]

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SelfPlayConfig:
        data = dict(data)
        data["hidden"] = tuple(data["hidden"])
        return cls(**data)


@chex.dataclass
class ReplayBuffer:
    """Circular buffer of training rows; row ``i`` is meaningful where ``valid[i]``.

    Attributes:
      obs: ``[N, ...]`` observations (player-to-move view).
      policy: ``[N, A]`` search policies (the policy targets).
      outcome: ``[N]`` final result of the game from the view of the player to
        move at that position: ``1`` win, ``0`` draw, ``-1`` loss.
      valid: ``[N]`` bool.
      next_row: ``[]`` int32, where the next row is written.
      num_added: ``[]`` int32, rows written so far (saturates at ``2**31 - 1``).
    """

    obs: chex.Array
    policy: chex.Array
    outcome: chex.Array
    valid: chex.Array
    next_row: chex.Array
    num_added: chex.Array


@chex.dataclass
class Games:
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
    """

    state: Any
    obs: chex.Array
    policy: chex.Array
    player: chex.Array
    length: chex.Array
    tree: Any = None
    tree_valid: Any = None


@chex.dataclass
class TrainState:
    """Everything a run needs to continue exactly."""

    params: Any
    opt_state: Any
    buffer: ReplayBuffer
    games: Games
    iteration: chex.Array
    rng: chex.Array


class Trainer:
    """Compiled self-play, training and evaluation functions for one config.

    Args:
      config: the run's :class:`SelfPlayConfig`.
      devices: devices of the mesh (default: all of ``jax.devices()``).

    The jitted functions are built once and reused: ``selfplay_step``,
    ``train_step``, ``act`` (greedy search with the network), ``act_pure``
    (greedy search with a uniform prior and zero value), ``env_step`` and
    ``env_init``.
    """

    def __init__(self, config: SelfPlayConfig, devices: Sequence[jax.Device] | None = None):
        from jaxpuct.envs.pgx_games import make_pgx_game

        self.config = config
        self.game = make_pgx_game(config.game)
        self.env = self.game.environment
        self.num_actions = self.game.num_actions
        devices = list(devices) if devices is not None else jax.devices()
        if config.batch_size % len(devices):
            raise ValueError(f"batch_size ({config.batch_size}) must be a multiple of the "
                             f"number of devices ({len(devices)})")
        self.mesh = Mesh(np.array(devices), ("batch",))
        self.batch_sharding = NamedSharding(self.mesh, P("batch"))
        self.replicated = NamedSharding(self.mesh, P())

        model = self._make_model(nnx.Rngs(0))
        self.graphdef, _ = networks.split(model)
        self.apply_fn = functools.partial(networks.apply, self.graphdef)
        self.root_fn = make_root_fn(self.apply_fn, self.env)
        self.recurrent_fn = make_recurrent_fn(self.apply_fn, self.env)
        self.optimizer = self._make_optimizer()

        def zero_apply(params, obs):
            del params
            return (jnp.zeros((obs.shape[0], self.num_actions), jnp.float32),
                    jnp.zeros((obs.shape[0],), jnp.float32))

        self.pure_root_fn = make_root_fn(zero_apply, self.env)
        self.pure_recurrent_fn = make_recurrent_fn(zero_apply, self.env)

        self.selfplay_step = jax.jit(self._selfplay_step, donate_argnums=(1, 2))
        self.train_step = jax.jit(self._train_step, donate_argnums=(1,))
        self.act = jax.jit(self._act)
        self.act_pure = jax.jit(self._act_pure)
        self.env_step = jax.jit(self.env.step)
        self.env_init = jax.jit(self.game.init, static_argnums=1)

    # ----------------------------------------------------------------- setup
    def _make_model(self, rngs: nnx.Rngs) -> nnx.Module:
        c = self.config
        if c.network == "mlp":
            return networks.MLPPolicyValue(self.num_actions, self.game.observation_shape,
                                           hidden=c.hidden, rngs=rngs)
        return networks.ResNetPolicyValue(self.num_actions, self.game.observation_shape,
                                          num_blocks=c.blocks, channels=c.channels,
                                          value_hidden=c.channels, rngs=rngs)

    def _make_optimizer(self) -> optax.GradientTransformation:
        c = self.config
        lr = c.learning_rate
        if c.lr_decay_steps:
            lr = optax.cosine_decay_schedule(c.learning_rate, c.lr_decay_steps, alpha=0.05)
        if c.optimizer == "adam":
            return optax.adam(lr)
        return optax.sgd(lr, momentum=c.momentum)

    def init(self, rng: jax.Array | None = None) -> TrainState:
        """A fresh :class:`TrainState` (network, optimiser, empty buffer, new games)."""
        c = self.config
        rng = jax.random.PRNGKey(c.seed) if rng is None else rng
        rng, model_key, games_key = jax.random.split(rng, 3)
        _, params = networks.split(self._make_model(nnx.Rngs(model_key)))
        opt_state = self.optimizer.init(params)
        n, t, a = c.buffer_size, c.trajectory_length, self.num_actions
        obs_shape, obs_dtype = self.game.observation_shape, self._obs_dtype()
        buffer = ReplayBuffer(
            obs=jnp.zeros((n, *obs_shape), obs_dtype),
            policy=jnp.zeros((n, a), jnp.float32),
            outcome=jnp.zeros((n,), jnp.float32),
            valid=jnp.zeros((n,), bool),
            next_row=jnp.zeros((), jnp.int32),
            num_added=jnp.zeros((), jnp.int32))
        b = c.batch_size
        games = Games(
            state=self.game.init(games_key, b),
            obs=jnp.zeros((b, t, *obs_shape), obs_dtype),
            policy=jnp.zeros((b, t, a), jnp.float32),
            player=jnp.zeros((b, t), jnp.int32),
            length=jnp.zeros((b,), jnp.int32))
        if c.reuse_tree:
            root = self.root_fn(params, rng, games.state)
            games = games.replace(tree=init_tree(root, c.capacity, graph=c.graph),
                                  tree_valid=jnp.zeros((b,), bool))
        state = TrainState(params=params, opt_state=opt_state, buffer=buffer, games=games,
                           iteration=jnp.zeros((), jnp.int32), rng=rng)
        return self.place(state)

    def _obs_dtype(self):
        probe = jax.eval_shape(self.game.env.init, jax.random.PRNGKey(0))
        return probe.observation.dtype

    def place(self, state: TrainState) -> TrainState:
        """Puts the games on the batch sharding and everything else replicated."""
        games = jax.device_put(state.games, self.batch_sharding)
        rest = jax.device_put(state.replace(games=None), self.replicated)
        return rest.replace(games=games)

    # ------------------------------------------------------------- self-play
    def _search(self, params, keys, state, fraction, temperature, pure=False,
                tree=None, tree_valid=None):
        c = self.config
        root_fn, recurrent_fn = ((self.pure_root_fn, self.pure_recurrent_fn) if pure
                                 else (self.root_fn, self.recurrent_fn))
        root = root_fn(params, keys[0], state)
        if tree is not None:
            # Games without a reusable subtree start from a fresh root.
            fresh = init_tree(root, c.capacity, graph=c.graph)
            tree = jax.tree.map(
                lambda old, new: jnp.where(
                    tree_valid.reshape((-1,) + (1,) * (old.ndim - 1)), old, new),
                tree, fresh)
        return alphazero_policy(
            params, keys, root, recurrent_fn, c.num_simulations,
            dirichlet_fraction=fraction, dirichlet_alpha=c.dirichlet_alpha,
            temperature=temperature, max_nodes=c.capacity, graph=c.graph, tree=tree)

    def _selfplay_step(self, params, games: Games, buffer: ReplayBuffer, rng):
        """One move of every game; returns ``(games, buffer, metrics)``."""
        c = self.config
        b, t = c.batch_size, c.trajectory_length
        keys = jax.random.split(rng, 2 * b)
        search_keys, init_keys = keys[:b], keys[b:]
        state = games.state
        temperature = jnp.where(games.length < c.temperature_moves, 1.0, 0.0)
        out = self._search(params, search_keys, state, c.dirichlet_fraction, temperature,
                           tree=games.tree, tree_valid=games.tree_valid)
        # A game whose root has no legal move cannot be live (it would have
        # ended), but keep the action legal for the environment anyway.
        action = jnp.maximum(out.action, 0)

        slot = jnp.minimum(games.length, t - 1)
        rows = jnp.arange(b)
        obs = games.obs.at[rows, slot].set(self.env.observe(state).astype(games.obs.dtype))
        policy = games.policy.at[rows, slot].set(out.action_weights)
        player = games.player.at[rows, slot].set(state.current_player.astype(jnp.int32))
        length = games.length + 1
        new_state = self.env.step(state, action)
        # A game longer than the trajectory is cut off there and scored a draw.
        finished = self.env.terminal(new_state) | (length >= t)

        # Outcome of each stored position for the player to move there.
        rewards = new_state.rewards.astype(jnp.float32)  # [B, 2] by player id
        outcome = jnp.take_along_axis(rewards, player, axis=1)  # [B, T]
        outcome = jnp.where(self.env.terminal(new_state)[:, None], outcome, 0.0)
        written = finished[:, None] & (jnp.arange(t)[None, :] < length[:, None])  # [B, T]
        flat_written = written.reshape(-1)
        offsets = jnp.cumsum(flat_written) - 1
        n = c.buffer_size
        index = jnp.where(flat_written, (buffer.next_row + offsets) % n, n)  # n: dropped
        num_new = jnp.sum(flat_written).astype(jnp.int32)

        def put(dest, src):
            return dest.at[index].set(src.reshape(b * t, *src.shape[2:]).astype(dest.dtype),
                                      mode="drop")

        buffer = ReplayBuffer(
            obs=put(buffer.obs, obs),
            policy=put(buffer.policy, policy),
            outcome=put(buffer.outcome, outcome),
            valid=put(buffer.valid, jnp.ones((b, t), bool)),
            next_row=(buffer.next_row + num_new) % n,
            num_added=jnp.minimum(buffer.num_added, 2**31 - 1 - num_new) + num_new)

        fresh = jax.vmap(self.game.env.init)(init_keys)
        state_next = jax.tree.map(
            lambda new, old: jnp.where(finished.reshape((b,) + (1,) * (new.ndim - 1)), new, old),
            fresh, new_state)
        tree, tree_valid, inherited = None, None, jnp.zeros((), jnp.int32)
        if games.tree is not None:
            inherited = jnp.sum(jnp.where(games.tree_valid, games.tree.node_visits[:, 0] - 1, 0))
            tree, reused = subtree(out.search_tree, action, graph=c.graph)
            tree_valid = reused & ~finished
        games = Games(state=state_next, obs=obs, policy=policy, player=player,
                      length=jnp.where(finished, 0, length), tree=tree, tree_valid=tree_valid)
        # Metrics of the games that ended now: the first mover's result.
        first_reward = jnp.take_along_axis(rewards, player[:, :1], axis=1)[:, 0]
        metrics = {
            "games_finished": jnp.sum(finished),
            "first_player_wins": jnp.sum(finished & (first_reward > 0)),
            "draws": jnp.sum(finished & (first_reward == 0)),
            "plies_finished": jnp.sum(jnp.where(finished, length, 0)),
            "inherited_visits": inherited,
        }
        return games, buffer, metrics

    # --------------------------------------------------------------- training
    def loss_fn(self, params, obs, target_policy, target_value):
        """``(loss, (policy_loss, value_loss, l2))`` on a minibatch."""
        c = self.config
        logits, value = self.apply_fn(params, obs)
        policy_loss = -jnp.mean(jnp.sum(target_policy * jax.nn.log_softmax(logits), axis=-1))
        value_loss = jnp.mean((value - target_value) ** 2)
        l2 = sum(jnp.sum(w ** 2) for w in jax.tree.leaves(params) if w.ndim >= 2)
        loss = policy_loss + c.value_weight * value_loss + c.weight_decay * l2
        return loss, (policy_loss, value_loss, l2)

    def _train_step(self, params, opt_state, buffer: ReplayBuffer, rng):
        """One optimiser step on a uniform minibatch of the filled rows."""
        c = self.config
        filled = jnp.maximum(jnp.minimum(buffer.num_added, c.buffer_size), 1)
        index = jax.random.randint(rng, (c.train_batch_size,), 0, filled)
        obs = buffer.obs[index]
        (loss, (pl, vl, l2)), grads = jax.value_and_grad(self.loss_fn, has_aux=True)(
            params, obs, buffer.policy[index], buffer.outcome[index])
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, {"loss": loss, "policy_loss": pl, "value_loss": vl,
                                   "l2": l2}

    def iterate(self, ts: TrainState, selfplay_steps: int, train_steps: int
                ) -> tuple[TrainState, dict[str, float]]:
        """One iteration: ``selfplay_steps`` moves of every game, then
        ``train_steps`` optimiser steps; returns the new state and averages.

        The games, buffer and optimiser state of ``ts`` are donated to the
        compiled steps (updated in place): use the returned state, not ``ts``."""
        rng = ts.rng
        params, games, buffer, opt_state = ts.params, ts.games, ts.buffer, ts.opt_state
        sp = []
        for _ in range(selfplay_steps):
            rng, key = jax.random.split(rng)
            games, buffer, m = self.selfplay_step(params, games, buffer, key)
            sp.append(m)
        tr = []
        for _ in range(train_steps):
            rng, key = jax.random.split(rng)
            params, opt_state, m = self.train_step(params, opt_state, buffer, key)
            tr.append(m)
        ts = ts.replace(params=params, opt_state=opt_state, games=games, buffer=buffer,
                        iteration=ts.iteration + 1, rng=rng)
        sp, tr = jax.device_get((sp, tr))
        finished = sum(int(m["games_finished"]) for m in sp)
        metrics = {
            "games_finished": finished,
            "first_player_win_rate": sum(int(m["first_player_wins"]) for m in sp)
            / max(finished, 1),
            "draw_rate": sum(int(m["draws"]) for m in sp) / max(finished, 1),
            "mean_game_length": sum(int(m["plies_finished"]) for m in sp) / max(finished, 1),
            "inherited_visits_per_move": sum(int(m["inherited_visits"]) for m in sp)
            / (len(sp) * self.config.batch_size) if sp else 0.0,
            "buffer_rows": int(min(int(jax.device_get(buffer.num_added)),
                                   self.config.buffer_size)),
        }
        for name in ("loss", "policy_loss", "value_loss", "l2"):
            metrics[name] = float(np.mean([m[name] for m in tr])) if tr else float("nan")
        return ts, metrics

    # ------------------------------------------------------------- evaluation
    def _act(self, params, keys, state):
        b = keys.shape[0]
        return self._search(params, keys, state, 0.0, jnp.zeros((b,))).action

    def _act_pure(self, keys, state, temperature):
        return self._search(None, keys, state, 0.0, temperature, pure=True).action

    def play_vs(self, params, opponent: str, rng: jax.Array) -> dict[str, int]:
        """``B`` games of the greedy agent (search with the network, no noise,
        temperature 0) against ``opponent``, half with the agent moving first.

        Opponents: ``"random"`` (uniform over legal moves) and ``"pure_search"``
        (search with a uniform prior and zero value, same simulations; it samples
        its first move in proportion to the visits and plays greedily after, so
        that the games differ).

        Returns:
          counts ``{"first": {"win","draw","loss"}, "second": {...}}`` from the
          agent's view, by the agent's colour.
        """
        if opponent not in ("random", "pure_search"):
            raise ValueError(f"unknown opponent {opponent!r}; accepted: random, pure_search")
        b = self.config.batch_size
        rng, init_key = jax.random.split(rng)
        state = self.env_init(init_key, b)
        agent_first = np.arange(b) < b // 2
        first_player = np.asarray(state.current_player)
        agent_id = np.where(agent_first, first_player, 1 - first_player)
        opp_moves = np.zeros(b, np.int32)
        # pgx pays the reward on the final step only (a terminal state steps to
        # itself with zero reward), so sum the rewards as they come.
        rewards = np.zeros(b, np.float32)
        for _ in range(self.config.trajectory_length):
            if bool(np.all(np.asarray(self.env.terminal(state)))):
                break
            rng, k1, k2 = jax.random.split(rng, 3)
            mover = np.asarray(state.current_player)
            a_agent = np.asarray(self.act(params, jax.random.split(k1, b),
                                          state))
            if opponent == "random":
                legal = np.asarray(self.env.legal_mask(state), bool)
                g = np.asarray(jax.random.gumbel(k2, legal.shape))
                a_opp = np.argmax(np.where(legal, g, -np.inf), axis=-1)
            else:
                temp = jnp.asarray((opp_moves == 0).astype(np.float32))
                a_opp = np.asarray(self.act_pure(jax.random.split(k2, b), state, temp))
            is_agent = mover == agent_id
            opp_moves += (~is_agent).astype(np.int32)
            action = np.maximum(np.where(is_agent, a_agent, a_opp), 0).astype(np.int32)
            state = self.env_step(state, jnp.asarray(action))
            rewards += np.asarray(state.rewards)[np.arange(b), agent_id]
        counts = {}
        for name, mask in (("first", agent_first), ("second", ~agent_first)):
            counts[name] = {"win": int(np.sum(mask & (rewards > 0))),
                            "draw": int(np.sum(mask & (rewards == 0))),
                            "loss": int(np.sum(mask & (rewards < 0)))}
        return counts


# ------------------------------------------------------------------ checkpoints
class CheckpointError(RuntimeError):
    """A checkpoint could not be used; the message says why and where."""


_CONFIG_FILE = "config.json"


def _checkpoint_dir(run_dir: str) -> str:
    return os.path.join(os.path.abspath(run_dir), "checkpoints")


def _manager(run_dir: str, max_to_keep: int = 2):
    import orbax.checkpoint as ocp
    return ocp.CheckpointManager(
        _checkpoint_dir(run_dir),
        options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                             enable_async_checkpointing=False))


def save_checkpoint(run_dir: str, ts: TrainState, config: SelfPlayConfig) -> int:
    """Saves ``ts`` under ``run_dir/checkpoints/<iteration>`` (and the config as
    ``run_dir/config.json``); returns the iteration saved."""
    import orbax.checkpoint as ocp
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, _CONFIG_FILE), "w") as f:
        json.dump(config.to_json(), f, indent=1, sort_keys=True)
    step = int(jax.device_get(ts.iteration))
    leaves = jax.tree.leaves(ts)
    manager = _manager(run_dir)
    manager.save(step, args=ocp.args.StandardSave({str(i): x for i, x in enumerate(leaves)}),
                 force=True)
    manager.wait_until_finished()
    manager.close()
    return step


def load_config(run_dir: str) -> SelfPlayConfig:
    """The config saved in ``run_dir`` (raises :class:`CheckpointError`)."""
    path = os.path.join(os.path.abspath(run_dir), _CONFIG_FILE)
    try:
        with open(path) as f:
            return SelfPlayConfig.from_json(json.load(f))
    except FileNotFoundError as err:
        raise CheckpointError(f"no checkpoint in {run_dir!r}: {path} is missing "
                              f"(start without --resume, or pass the right --run-dir)") from err
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(f"corrupt run config {path}: {err}") from err


def restore_checkpoint(run_dir: str, template: TrainState, config: SelfPlayConfig
                       ) -> TrainState:
    """Restores the newest checkpoint of ``run_dir`` into ``template``'s structure,
    shapes, dtypes and shardings.

    Raises:
      CheckpointError: no checkpoint, a config that differs from ``config``
        (the differing fields are listed), or unreadable / mismatched arrays.
    """
    import orbax.checkpoint as ocp
    saved = load_config(run_dir)
    if saved != config:
        diff = [f"{k}: saved {getattr(saved, k)!r}, now {getattr(config, k)!r}"
                for k in config.to_json() if getattr(saved, k) != getattr(config, k)]
        raise CheckpointError(f"checkpoint in {run_dir!r} was made with a different "
                              f"configuration ({'; '.join(diff)}); resume with the "
                              f"options of that run, or use another run directory")
    ckpt_dir = _checkpoint_dir(run_dir)
    try:
        manager = _manager(run_dir)
        step = manager.latest_step()
    except Exception as err:  # orbax raises many kinds
        raise CheckpointError(f"cannot read checkpoints in {ckpt_dir!r}: {err}") from err
    if step is None:
        raise CheckpointError(f"no checkpoint in {ckpt_dir!r}")
    leaves, treedef = jax.tree.flatten(template)
    abstract = {str(i): jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
                for i, x in enumerate(leaves)}
    try:
        restored = manager.restore(step, args=ocp.args.StandardRestore(abstract))
    except Exception as err:
        raise CheckpointError(
            f"checkpoint {step} in {ckpt_dir!r} is corrupt or does not match this "
            f"configuration: {type(err).__name__}: {str(err)[:300]}") from err
    finally:
        manager.close()
    if set(restored) != set(abstract):
        raise CheckpointError(f"checkpoint {step} in {ckpt_dir!r} has {len(restored)} arrays, "
                              f"expected {len(abstract)}")
    out = []
    for i, want in enumerate(leaves):
        got = restored[str(i)]
        if got.shape != want.shape or got.dtype != want.dtype:
            raise CheckpointError(
                f"checkpoint {step} in {ckpt_dir!r}: array {i} has shape {got.shape} "
                f"{got.dtype}, expected {want.shape} {want.dtype}")
        out.append(got)
    return jax.tree.unflatten(treedef, out)
