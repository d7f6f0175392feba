"""The wiring: ``jax.jit``, buffer donation and the device mesh.

:class:`Trainer` compiles the pure functions of :mod:`~jaxpuct.alphazero.selfplay`,
:mod:`~jaxpuct.alphazero.training` and :mod:`~jaxpuct.alphazero.evaluation` for
one :class:`~jaxpuct.alphazero.config.SelfPlayConfig`, and places the state.

Devices. The mesh spans the given devices (default: all local ones) with one
axis ``"batch"``; the games (every leaf of :class:`Games`, leading axis ``B``) are
placed with ``NamedSharding(mesh, P("batch"))`` and everything else (network,
optimiser state, buffer, RNG) is replicated. ``jax.jit`` partitions the search
over the batch axis. The train step draws its minibatch from the replicated
buffer and splits its rows over the same axis, so each device computes the
gradient of its rows and the loss's mean over the minibatch becomes an
all-reduce (data parallelism; without the split, ``jit`` ran the whole minibatch
on every device). ``B`` and ``train_batch_size`` must be multiples of the number
of devices.

Multi-host. Call ``jax.distributed.initialize()`` in every process before
anything else touches JAX; ``jax.devices()`` then lists the devices of all hosts,
``Trainer(config, devices=jax.devices())`` builds the mesh over them and every
process runs the same program (SPMD). Tested on CPU: one process with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``, and two processes with two
devices each (:mod:`~jaxpuct.alphazero.distributed`, ``examples/distributed_selfplay.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpuct._dataclass import Replaceable, mutable_pytree_dataclass
from jaxpuct.alphazero import evaluation, networks, selfplay, training
from jaxpuct.alphazero.buffer import ReplayBuffer, empty_buffer, filled_rows
from jaxpuct.alphazero.config import SelfPlayConfig
from jaxpuct.alphazero.distributed import BatchMesh

__all__ = ["NonFiniteError", "TrainState", "Trainer", "check_finite", "iteration_metrics"]


class NonFiniteError(FloatingPointError):
    """The loss or the parameters became NaN or infinite; nothing was saved."""


@mutable_pytree_dataclass
class TrainState(Replaceable):
    """Everything a run needs to continue exactly (the checkpointed pytree)."""

    params: Any
    opt_state: Any
    buffer: ReplayBuffer
    games: selfplay.Games
    iteration: jax.Array
    rng: jax.Array


# The network built only for its structure (graphdef) and the dtype probe: any
# key gives the same structure, and the probe is traced (eval_shape), not run.
_STRUCTURE_KEY = 0


def make_model(config: SelfPlayConfig, num_actions: int, obs_shape: tuple[int, ...],
               rngs: nnx.Rngs) -> nnx.Module:
    """The configured policy-value network."""
    if config.network == "mlp":
        return networks.MLPPolicyValue(num_actions, obs_shape, hidden=config.hidden, rngs=rngs)
    return networks.ResNetPolicyValue(num_actions, obs_shape, num_blocks=config.blocks,
                                      channels=config.channels, value_hidden=config.channels,
                                      rngs=rngs)


def _all_finite(tree: Any) -> jax.Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]))


class Trainer:
    """Compiled self-play, training and evaluation functions for one config.

    Args:
      config: the run's :class:`SelfPlayConfig`.
      devices: devices of the mesh (default: all of ``jax.devices()``).

    Jitted: ``selfplay_step(params, games, buffer, rng)`` (games and buffer
    donated), ``train_step(params, opt_state, buffer, rng)`` (optimiser state
    donated), ``act(params, keys, state)``, ``act_pure(keys, state, temperature)``,
    ``env_step``, ``env_init`` and ``all_finite``.

    (About 110 lines with docstrings: one jit per pure function, state creation
    and placement, and the iteration loop that drives them; no logic of its own.)
    """

    # jax.Device is an alias of a compiled class that pyright reads as a variable.
    def __init__(self, config: SelfPlayConfig,
                 devices: Sequence[jax.Device] | None = None):  # pyright: ignore[reportInvalidTypeForm]
        from jaxpuct.envs.pgx_games import make_pgx_game
        self.config, self.game = config, make_pgx_game(config.game)
        self.env = self.game.environment
        self.mesh, self.batch_sharding, self.replicated = BatchMesh.over(
            devices, batch_size=config.batch_size, train_batch_size=config.train_batch_size)
        # Traced, not run: the structure is all the graphdef holds.
        self.graphdef, _ = networks.split(
            nnx.eval_shape(lambda: self._model(nnx.Rngs(_STRUCTURE_KEY))))
        self.apply_fn = functools.partial(networks.apply, self.graphdef)
        self.optimizer = training.make_optimizer(config)
        self.fns = selfplay.make_search_fns(config, self.env, self.apply_fn,
                                            self.game.num_actions)
        pure = selfplay.make_search_fns(config, self.env, None, self.game.num_actions)
        fresh = _fresh_games_fn(config, self.game)
        self.selfplay_step = jax.jit(functools.partial(selfplay.selfplay_step, self.fns, fresh),
                                     donate_argnums=(1, 2))
        self.train_step = jax.jit(functools.partial(
            training.train_step, self.apply_fn, self.optimizer, config,
            batch_sharding=self.batch_sharding), donate_argnums=(1,))
        self.act = jax.jit(lambda params, keys, state: selfplay.search(
            self.fns, params, keys, state, dirichlet_fraction=0.0,
            temperature=jnp.zeros((keys.shape[0],))).action)
        self.act_pure = jax.jit(lambda keys, state, temperature: selfplay.search(
            pure, None, keys, state, dirichlet_fraction=0.0, temperature=temperature).action)
        self.env_step = jax.jit(self.env.step)
        self.env_init = jax.jit(self.game.init, static_argnums=1)
        self.all_finite = jax.jit(_all_finite)

    def _model(self, rngs: nnx.Rngs) -> nnx.Module:
        return make_model(self.config, self.game.num_actions, self.game.observation_shape, rngs)

    def init(self, rng: jax.Array | None = None) -> TrainState:
        """A fresh :class:`TrainState` (network, optimiser, empty buffer, new games)."""
        rng = jax.random.PRNGKey(self.config.seed) if rng is None else rng
        return self.place(_fresh_state(self.config, rng))

    def place(self, state: TrainState) -> TrainState:
        """Puts the games on the batch sharding and everything else replicated."""
        games = jax.device_put(state.games, self.batch_sharding)
        return jax.device_put(state.replace(games=None), self.replicated).replace(games=games)

    def iterate(self, ts: TrainState, selfplay_steps: int | None = None,
                train_steps: int | None = None) -> tuple[TrainState, dict[str, Any]]:
        """``selfplay_steps`` moves of every game, then ``train_steps`` optimiser
        steps (defaults: the config's); returns the new state and the metrics.

        The games, buffer and optimiser state of ``ts`` are donated to the compiled
        steps: use the returned state, not ``ts``.

        Raises:
          NonFiniteError: a loss or a parameter is NaN or infinite.
        """
        c = self.config
        selfplay_steps = c.selfplay_steps if selfplay_steps is None else selfplay_steps
        train_steps = c.train_steps if train_steps is None else train_steps
        rng, params, games, buffer, opt_state = (ts.rng, ts.params, ts.games, ts.buffer,
                                                 ts.opt_state)
        sp, tr = [], []
        for _ in range(selfplay_steps):
            rng, key = jax.random.split(rng)
            games, buffer, m = self.selfplay_step(params, games, buffer, key)
            sp.append(m)
        for _ in range(train_steps):
            rng, key = jax.random.split(rng)
            params, opt_state, m = self.train_step(params, opt_state, buffer, key)
            tr.append(m)
        ts = ts.replace(params=params, opt_state=opt_state, games=games, buffer=buffer,
                        iteration=ts.iteration + 1, rng=rng)
        metrics = iteration_metrics(jax.device_get(sp), jax.device_get(tr), c.batch_size,
                                    int(filled_rows(buffer)))
        check_finite(metrics, bool(self.all_finite(params)), int(ts.iteration))
        return ts, metrics

    def play_vs(self, params: Any, opponent: str, rng: jax.Array) -> evaluation.Counts:
        """``B`` greedy games (search with the network, no noise, temperature 0)
        against ``"random"`` or ``"pure_search"`` (see :mod:`evaluation`)."""
        return evaluation.play_vs(
            functools.partial(self.act, params),
            evaluation.make_opponent(opponent, self.env, self.act_pure), self.env,
            self.env_init, self.env_step, self.config.batch_size,
            self.config.trajectory_length, rng)


def _fresh_games_fn(config: SelfPlayConfig, game: Any) -> Callable:
    """``keys [B] -> pgx states [B]`` of new self-play games (with the config's
    random openings), for the first batch and every restart alike."""
    return selfplay.with_random_openings(game.environment, jax.vmap(game.env.init),
                                         config.opening_random_moves, config.opening_share)


# One compiled program per configuration (the config is static and hashable), shared
# by every Trainer of that configuration. Run op by op, the state's creation compiled
# about a hundred one-operation programs in a new process (1.1-1.5 CPU-s for the
# test suite's tiny tic-tac-toe config, against 0.5-0.75 s jitted).
@functools.partial(jax.jit, static_argnums=0)
def _fresh_state(config: SelfPlayConfig, rng: jax.Array) -> TrainState:
    from jaxpuct.envs.pgx_games import make_pgx_game
    game = make_pgx_game(config.game)
    keys = jax.random.split(rng, 3)  # indexed: pyright types unpacking as Any
    rng, model_key, games_key = keys[0], keys[1], keys[2]
    graphdef, params = networks.split(
        make_model(config, game.num_actions, game.observation_shape, nnx.Rngs(model_key)))
    probe = jax.random.PRNGKey(_STRUCTURE_KEY)
    obs_dtype = jax.eval_shape(game.env.init, probe).observation.dtype
    buffer = empty_buffer(config.buffer_size, game.observation_shape, obs_dtype,
                          game.num_actions, root_value=config.value_target_mix > 0)
    fresh = _fresh_games_fn(config, game)
    games = selfplay.init_games(config, lambda key, b: fresh(jax.random.split(key, b)),
                                games_key, game.observation_shape, obs_dtype,
                                game.num_actions)
    if config.reuse_tree:
        fns = selfplay.make_search_fns(config, game.environment,
                                       functools.partial(networks.apply, graphdef),
                                       game.num_actions)
        root = fns.root_fn(params, rng, games.state)
        games = games.replace(tree=selfplay.fresh_tree(config, root),
                              tree_valid=jnp.zeros((config.batch_size,), bool))
    return TrainState(params=params, opt_state=training.make_optimizer(config).init(params),
                      buffer=buffer, games=games, iteration=jnp.zeros((), jnp.int32), rng=rng)


def check_finite(metrics: dict[str, Any], params_finite: bool, iteration: int) -> None:
    """Raises :class:`NonFiniteError` if a loss or a parameter is NaN or infinite."""
    bad = [k for k in ("loss", "policy_loss", "value_loss")
           if metrics[k] is not None and not np.isfinite(metrics[k])]
    if not params_finite:
        bad.append("a parameter")
    if bad:
        raise NonFiniteError(f"iteration {iteration}: {', '.join(bad)} is NaN or infinite; "
                             f"stopped before saving anything of this iteration")


def iteration_metrics(selfplay: list[dict], train: list[dict], batch_size: int,
                      buffer_rows: int) -> dict[str, Any]:
    """Averages of one iteration's per-step metrics (host values). Losses are
    ``None`` when no optimiser step ran (so that they serialise as JSON null)."""
    finished = sum(int(m["games_finished"]) for m in selfplay)
    per_game = max(finished, 1)
    metrics: dict[str, Any] = {
        "games_finished": finished,
        "first_player_win_rate": sum(int(m["first_player_wins"]) for m in selfplay) / per_game,
        "draw_rate": sum(int(m["draws"]) for m in selfplay) / per_game,
        "mean_game_length": sum(int(m["plies_finished"]) for m in selfplay) / per_game,
        "inherited_visits_per_move": (sum(int(m["inherited_visits"]) for m in selfplay)
                                      / (len(selfplay) * batch_size) if selfplay else 0.0),
        # Leaves a full tree evaluated but could not keep: max_nodes too small.
        "unstored_leaves_per_move": (sum(int(m["unstored_leaves"]) for m in selfplay)
                                     / (len(selfplay) * batch_size) if selfplay else 0.0),
        "simulations_saved_per_move": (
            sum(int(m["simulations_saved"]) for m in selfplay)
            / (len(selfplay) * batch_size) if selfplay else 0.0),
        "buffer_rows": buffer_rows,
    }
    for name in ("loss", "policy_loss", "value_loss", "l2"):
        metrics[name] = float(np.mean([m[name] for m in train])) if train else None
    return metrics


