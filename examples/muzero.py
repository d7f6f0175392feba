"""MuZero self-play and training on tic-tac-toe, connect four or 2048 with jaxpuct
(a learned model).

    python -m examples.muzero --game tic_tac_toe
    python -m examples.muzero --iterations 100 --policy alphazero --run-dir runs/muzero_ttt
    python -m examples.muzero --iterations 100 --policy sampled --num-samples 4
    python -m examples.muzero --game 2048 --iterations 40
    python -m examples.muzero --game 2048 --model stochastic --max-minutes 15
    python -m examples.muzero --game connect_four --run-dir runs/muzero_c4   # 60 minutes

Each iteration plays ``--batch-size`` games to their ends in lockstep (the
model's root from the real board and legal mask, the search inside the learned
model, the real rules; one ``jax.jit``), writes them to the device replay buffer,
then takes ``--train-steps`` optimiser steps on ``K``-step unrolls
(:mod:`jaxpuct.muzero.training`); with ``--reanalyse-fraction F`` the first
``F`` of each training batch gets fresh targets from a search with the current
parameters, inside the same jitted step (:mod:`jaxpuct.muzero.reanalyse`).
Every ``--eval-every`` iterations the greedy search and the raw prior are
scored on all 4520 non-terminal positions against the minimax-optimal moves,
and the greedy search plays 256 games against a minimax player and 256 against
a random one, half as X and half as O
(:mod:`jaxpuct.muzero.selfplay`).

``--game 2048`` (:mod:`jaxpuct.muzero.game_2048`; its defaults are
``GAME_DEFAULTS["2048"]``) keeps ``--batch-size`` boards alive across iterations
and plays ``--segment-length`` moves of each per iteration, a game cut by the
segment's end written truncated; every ``--eval-every`` iterations the greedy
search plays ``--eval-games`` games (64) from fresh boards to their ends (mean
score ± standard error). ``--game 2048 --model stochastic`` is Stochastic MuZero (Antonoglou et al.
2022, :mod:`jaxpuct.muzero.stochastic_training`): the same segments searched by
``stochastic_gumbel_policy`` (``--policy gumbel``) or ``stochastic_policy``
(``--policy alphazero``) through the learned afterstates and ``--num-codes``
chance codes, trained on windows that also carry their ``K + 1`` observations
(the encoder's input), with the same evaluation, checkpoints and metrics (plus
the afterstate value, code prior and commitment terms and the codes'
perplexity). ``--game connect_four`` (:mod:`jaxpuct.muzero.board_game`, pgx's rules;
``GAME_DEFAULTS["connect_four"]``) keeps its games alive across iterations the
same way and, every ``--eval-every`` iterations, plays ``--eval-games`` games of
the greedy search at ``--eval-simulations`` against OpenSpiel's MCTSBot with
``--opponent-simulations`` (:mod:`jaxpuct.alphazero.arena`; the time they take
is not counted in ``--max-minutes``). ``--run-dir`` takes the directory's lock
(:mod:`jaxpuct.alphazero.rundir`), writes ``metrics.jsonl`` (and
``metrics.png`` after every evaluation, :mod:`examples.muzero_plot`) and, every
``--checkpoint-every`` iterations and at the end, the whole state (network,
optimiser, replay buffer, iteration, key) with
:mod:`jaxpuct.alphazero.checkpoints` (orbax, verified by SHA-256);
``--resume`` continues from the newest intact checkpoint with the same config.

Every flag is a field of :class:`jaxpuct.muzero.config.MuZeroConfig`, generated
by the AlphaZero example's :func:`jaxpuct.alphazero.config.add_arguments`.

With several devices (``jax.devices()``), the games and every training batch's
rows are split over them and the rest replicated (:class:`Placement`);
``--batch-size`` and ``--train-batch-size`` must then be multiples of their number.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from jaxpuct.alphazero import checkpoints, rundir
from jaxpuct.alphazero import config as config_lib
from jaxpuct.alphazero.distributed import BatchMesh
from jaxpuct.muzero import (
    board_game,
    game_2048,
    reanalyse,
    replay,
    selfplay,
    stochastic_training,
    symmetry,
    training,
)
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.networks import init_network
from jaxpuct.muzero.stochastic_model import StochasticMuZeroModel
from jaxpuct.muzero.stochastic_networks import init_stochastic_network

# A game's own defaults, under the flags given on the command line. 2048: scores
# of any size (categorical heads over h-transformed supports: values to about
# 17,000, rewards to 8,000), one player with a discount below 1 and n-step
# values, boards kept across iterations in segments (module docstring).
GAME_DEFAULTS: dict[str, dict[str, Any]] = {
    "2048": {"discount": 0.997, "td_steps": 10, "value_support": 150,
             "reward_support": 100, "hidden": (256, 256), "latent_size": 128,
             "batch_size": 256, "segment_length": 200, "buffer_size": 200000,
             "train_batch_size": 256, "train_steps": 200, "learning_rate": 1e-3,
             "num_simulations": 16},
    # Two players, pgx's rules, games kept across iterations in segments of one
    # longest game; Monte Carlo value targets within a game (td_steps = 42),
    # bootstrapped at a segment's cut.
    # The action as its column (a drop), not as a square of the top row.
    "connect_four": {"network_kind": "resnet", "action_encoding": "column",
                     "channels": 32, "num_blocks": 2,
                     "hidden": (32,), "batch_size": 64, "segment_length": 42,
                     "td_steps": 42, "num_simulations": 32, "buffer_size": 100000,
                     "train_batch_size": 256, "train_steps": 20, "learning_rate": 2e-3,
                     "iterations": 100000, "max_minutes": 60.0, "eval_every": 50,
                     "checkpoint_every": 25},
}


def game_defaults(argv: list[str] | None) -> dict[str, Any]:
    """The defaults of the game named on the command line (``--game G``)."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--game", default=MuZeroConfig.game)
    known, _ = probe.parse_known_args(argv)
    return GAME_DEFAULTS.get(known.game, {})


def build_parser(defaults: dict[str, Any] | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.muzero",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    d = defaults or {}
    config_lib.add_arguments(p, MuZeroConfig, defaults)
    p.add_argument("--run-dir", default=None, help="directory for config.json, "
                   "metrics.jsonl and checkpoints (locked while the run lives); none by "
                   "default")
    p.add_argument("--iterations", type=int, default=d.get("iterations", 60),
                   help="last iteration (self-play + training) of the run")
    p.add_argument("--eval-every", type=int, default=d.get("eval_every", 10),
                   help="iterations between evaluations (0: at the end only)")
    p.add_argument("--checkpoint-every", type=int, default=d.get("checkpoint_every", 100),
                   help="iterations between checkpoints (with --run-dir; 0: at the end only)")
    p.add_argument("--keep-checkpoints", type=int, default=2,
                   help="newest checkpoints kept in --run-dir (each holds the replay buffer)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --run-dir from its newest intact checkpoint")
    p.add_argument("--max-minutes", type=float, default=d.get("max_minutes", 0.0),
                   help="stop after this many minutes of self-play and training CPU time "
                   "in this process (evaluations not counted; pin the run to one core "
                   "with taskset for a one-core figure; 0: no limit)")
    p.add_argument("--extra-eval-simulations", type=config_lib.positive_ints, default=(),
                   help="2048 and tic_tac_toe: comma-separated simulation counts at which "
                   "every evaluation is also made with the same network (2048: the same "
                   "boards; tic-tac-toe: optimal moves, lines lost, games against minimax "
                   "and random), under eval_at_S in metrics.jsonl, beside the run's own "
                   "--num-simulations")
    p.add_argument("--eval-games", type=int, default=64,
                   help="2048 and connect_four: games per evaluation (2048: from fresh "
                   "boards; connect_four: half per colour against MCTSBot)")
    arena_flags = p.add_argument_group("connect_four: evaluation against OpenSpiel's MCTSBot")
    arena_flags.add_argument("--eval-simulations", type=int, default=256,
                             help="the greedy search's simulations per move there")
    arena_flags.add_argument("--opponent-simulations", type=int, default=1000,
                             help="MCTSBot's simulations per move (one random rollout per "
                             "leaf, solve=True)")
    return p


@chex.dataclass
class TrainState:
    """What a run needs to continue exactly (the checkpointed pytree)."""

    params: Any
    opt_state: Any
    buffer: replay.TrajectoryBuffer
    iteration: chex.Array
    target_params: Any  # None unless --target-update-every > 0
    rng: chex.Array  # uint32 key data (orbax stores plain arrays)
    boards: Any = None  # the games in progress (game_2048.Boards, board_game.Games)
    ema_params: Any = None  # the parameters' moving average (--ema-decay > 0)


class Placement(NamedTuple):
    """Where a run's arrays live (:class:`jaxpuct.alphazero.distributed.BatchMesh`).

    The games in progress (every leaf of ``TrainState.boards``, leading axis
    ``B``) are split over the devices, so ``jit`` partitions self-play over
    them; network, optimiser state and replay buffer are replicated; each
    training batch's rows are split again (:func:`sample_batch`), so the
    gradient's mean over the batch is an all-reduce (data parallelism). As
    :class:`jaxpuct.alphazero.Trainer` places AlphaZero's state.
    """

    batch: NamedSharding
    replicated: NamedSharding

    @classmethod
    def over(cls, config: MuZeroConfig,
             devices: Sequence[Any] | None = None) -> Placement:
        """The placement over ``devices`` (default: all of ``jax.devices()``);
        ``ValueError`` unless ``config.batch_size`` and ``config.train_batch_size``
        are multiples of their number."""
        mesh = BatchMesh.over(devices, batch_size=config.batch_size,
                              train_batch_size=config.train_batch_size)
        return cls(mesh.batch, mesh.replicated)

    def place(self, ts: TrainState) -> TrainState:
        """``ts`` with its games split over the devices and the rest replicated."""
        boards = None if ts.boards is None else jax.device_put(ts.boards, self.batch)
        rest = jax.device_put(ts.replace(boards=None), self.replicated)
        return rest.replace(boards=boards)


def make_model(config: MuZeroConfig, graphdef) -> selfplay.LearnedModel:
    """The searched model of ``config.model``: MuZero's or Stochastic MuZero's."""
    if config.model == "stochastic":
        return StochasticMuZeroModel(graphdef, discount=config.discount,
                                     zero_sum=config.zero_sum)
    return MuZeroModel(graphdef, discount=config.discount, zero_sum=config.zero_sum)


def loss_names(config: MuZeroConfig) -> tuple[str, ...]:
    """The loss terms an iteration reports (means over its optimiser steps)."""
    if config.model == "stochastic":
        return LOSS_NAMES + STOCHASTIC_LOSS_NAMES
    if config.consistency_weight > 0:
        return (*LOSS_NAMES, "consistency_loss")
    return LOSS_NAMES


def sample_batch(config: MuZeroConfig, model: selfplay.LearnedModel, buffer, key, step,
                 search_params, batch_sharding: NamedSharding | None = None):
    """The batch of optimiser step ``step`` (traced), sampled with
    ``fold_in(key, step)``: :func:`.replay.sample`'s (MuZero) or
    :func:`.stochastic_training.sample`'s with the windows' observations
    (``--model stochastic``); with ``--reanalyse-fraction`` its first rows' targets
    made anew by ``model``'s search with ``search_params``; with
    ``--symmetry-augment`` each row under a random symmetry of the board. With
    ``batch_sharding`` the rows are split over its devices (:class:`Placement`)."""
    # The same arguments: the stochastic sampler adds the windows' observations, and
    # the consistency loss asks MuZero's for the next ones.
    sample = (stochastic_training.sample if config.model == "stochastic" else
              functools.partial(replay.sample,
                                next_observations=config.consistency_weight > 0))
    batch = sample(buffer, jax.random.fold_in(key, step), config.train_batch_size,
                   config.unroll_steps, config.td_steps, config.signed_discount,
                   config.priority_alpha)
    if batch_sharding is not None:
        # Drawn from the replicated buffer the rows are replicated, and jit would
        # run the whole batch (and its reanalyse search) on every device.
        batch = jax.lax.with_sharding_constraint(batch, batch_sharding)
    if config.reanalyse_fraction > 0:
        # With n at least a game's length the value target is the game's return: no
        # search can change it. 2048's games are longer than any n.
        bootstrap = not config.zero_sum or config.td_steps < (config.max_plies or 0)
        # Visit targets at temperature 1 without root noise: with the acting
        # search's Dirichlet noise reanalyse was worse (docs/muzero.md).
        search = functools.partial(selfplay.search_roots, config, model, greedy=False,
                                   root_noise=False)
        batch = reanalyse.reanalyse_batch(
            buffer, batch, search_params, jax.random.fold_in(key, config.train_steps + step),
            search, fraction=config.reanalyse_fraction, unroll_steps=config.unroll_steps,
            td_steps=config.td_steps, discount=config.signed_discount, bootstrap=bootstrap)
    if config.symmetry_augment:
        # After reanalyse, which searches the stored (unmoved) positions.
        # MuZeroConfig refuses symmetry with the stochastic model.
        assert isinstance(batch, replay.Batch)
        batch = symmetry.random_augment(
            batch, jax.random.fold_in(key, 2 * config.train_steps + step), config.game)
    return batch


@functools.partial(jax.jit, static_argnums=(0, 1, 2), static_argnames=("batch_sharding",))
def train_step(config: MuZeroConfig, graphdef, optimizer, params, opt_state, buffer, key,
               target, step, first_step, batch_sharding: NamedSharding | None = None):
    """Optimiser step ``step`` of an iteration's ``config.train_steps`` (``first_step``
    done before them): ``(params, opt_state, priorities or None, metrics, target)``.
    ``target``: the target network's parameters (``--target-update-every N > 0``),
    which reanalyse searches with; copied from ``params`` after every ``N``-th step.
    ``priorities``: ``(rows, new priorities)`` of the batch with prioritised replay.
    The batch is :func:`sample_batch`'s; with ``--model stochastic`` the step is
    :func:`.stochastic_training.stochastic_train_step`. ``batch_sharding``: see
    :func:`sample_batch`.
    """
    model = make_model(config, graphdef)
    search_params = target if config.target_update_every else params
    batch = sample_batch(config, model, buffer, key, step, search_params, batch_sharding)
    if isinstance(batch, stochastic_training.StochasticBatch):
        params, opt_state, metrics = stochastic_training.stochastic_train_step(
            graphdef, optimizer, config.stochastic_loss, params, opt_state, batch)
    else:
        params, opt_state, metrics = training.train_step(graphdef, optimizer, config.loss,
                                                         params, opt_state, batch)
    return _after_step(config, params, opt_state, batch.index, metrics, target,
                       first_step + step + 1)


def _after_step(config: MuZeroConfig, params, opt_state, index, metrics, target, done):
    """``train_step``'s result after ``done`` optimiser steps in all: the batch's
    new priorities (``index [B]`` its rows) with prioritised replay, the target
    network's copy, the reported terms."""
    priorities = None
    if config.priority_alpha > 0:
        priorities = (index, metrics["priority"])
    if config.target_update_every:
        target = training.update_target(params, target, done, config.target_update_every)
    return params, opt_state, priorities, {k: metrics[k] for k in loss_names(config)}, target


LOSS_NAMES = ("loss", "policy_loss", "value_loss", "reward_loss")
# Stochastic MuZero's further terms (jaxpuct.muzero.stochastic_training), and the
# perplexity of the codes the encoder gave the batch's transitions (1: one code for
# all, collapsed; up to num_codes).
STOCHASTIC_LOSS_NAMES = ("afterstate_value_loss", "code_loss", "commitment_loss",
                         "code_perplexity")
_update_priorities = jax.jit(replay.update_priorities)
_polyak_average = jax.jit(training.polyak_average)


def train(config: MuZeroConfig, graphdef, optimizer, params, opt_state, buffer, key,
          target=None, first_step=0, batch_sharding: NamedSharding | None = None):
    """``config.train_steps`` optimiser steps (``first_step`` done before); the
    metrics are their means: ``(params, opt_state, buffer, metrics, target)``.

    One jitted call per step, not a ``fori_loop`` over them: inside a loop XLA:CPU
    runs a convolution's backward pass two orders of magnitude slower (the
    connect-four ResNet, 32 rows: 10.6 CPU-s a step inside the loop, 0.06 alone).
    """
    names = loss_names(config)
    sums = {k: jnp.zeros(()) for k in names}
    for i in range(config.train_steps):
        params, opt_state, priorities, metrics, target = train_step(
            config, graphdef, optimizer, params, opt_state, buffer, key, target, jnp.int32(i),
            jnp.asarray(first_step, jnp.int32), batch_sharding=batch_sharding)
        if priorities is not None:
            buffer = _update_priorities(buffer, *priorities)
        sums = {k: sums[k] + metrics[k] for k in names}
    steps = max(config.train_steps, 1)
    return params, opt_state, buffer, {k: v / steps for k, v in sums.items()}, target


@functools.cache
def _optimizer(loss: training.LossConfig):
    """One optimiser object per loss config: ``train_step`` takes it as a static
    argument, so a second run in the process (a resume) reuses its compilation."""
    return training.make_optimizer(loss)


def observation_spec(config: MuZeroConfig) -> tuple[tuple[int, ...], Any]:
    """One observation's shape and the buffer's dtype for it."""
    if config.game == "2048":
        return game_2048.OBS_SHAPE, jnp.bool_  # one-hot planes stored as bits
    if config.game == "connect_four":
        return board_game.game(config.game).observation_shape, jnp.bool_
    return selfplay.OBS_SHAPE, jnp.float32


def initial_state(config: MuZeroConfig) -> tuple[Any, Any, TrainState]:
    """``(graphdef, optimizer, the run's first TrainState)`` (also the template a
    checkpoint is restored into)."""
    init_key, key = jax.random.split(jax.random.key(config.seed))
    obs_shape, obs_dtype = observation_spec(config)
    # The buffer keeps 2048's board flat; a ResNet reads it as planes.
    net_shape = (game_2048.BOARD_SHAPE if config.game == "2048" and
                 config.network_kind == "resnet" else obs_shape)
    if config.model == "stochastic":
        graphdef, params = init_stochastic_network(config.network, config.num_actions,
                                                   config.num_codes, net_shape, init_key)
    else:
        graphdef, params = init_network(config.network, config.num_actions, net_shape,
                                        init_key)
    optimizer = _optimizer(config.loss)
    boards_key, key = jax.random.split(key)
    boards = None
    if config.game == "2048":
        boards = game_2048.fresh_boards(boards_key, config.batch_size)
    elif config.game == "connect_four":
        boards = board_game.fresh_games(config.game, boards_key, config.batch_size)
    ts = TrainState(params=params, opt_state=optimizer.init(params),
                    buffer=replay.empty_buffer(
                        config.buffer_size, obs_shape, obs_dtype, config.num_actions,
                        num_samples=config.num_samples if config.policy == "sampled" else None),
                    iteration=jnp.zeros((), jnp.int32), rng=jax.random.key_data(key),
                    target_params=params if config.target_update_every else None,
                    boards=boards, ema_params=params if config.ema_decay else None)
    return graphdef, optimizer, ts


def evaluate_against_mcts(config: MuZeroConfig, model: MuZeroModel, params: Any, seed: int,
                          games: int, simulations: int, opponent_simulations: int) -> dict:
    """The greedy search at ``simulations`` against MCTSBot (``opponent_simulations``,
    one rollout per leaf, solve) over ``games`` games, half per colour."""
    from jaxpuct.alphazero import arena
    agent = board_game.arena_agent(dataclasses.replace(config, num_simulations=simulations),
                                   model, params)
    bot = arena.BotSpec(simulations=opponent_simulations)
    tic = time.time()
    result = arena.play_match(agent, config.game, bot, games, seed=seed)
    total = result.total
    return {"mcts_simulations": opponent_simulations, "mcts_games": total.games,
            "mcts_wins": total.wins, "mcts_draws": total.draws, "mcts_losses": total.losses,
            "mcts_score": round(total.score, 4), "mcts_score_low": round(total.score_low, 4),
            "mcts_score_high": round(total.score_high, 4),
            "mcts_seconds": round(time.time() - tic, 1)}


class BoardNetwork(NamedTuple):
    """A board-game run's evaluated network (:func:`load_board_network`)."""

    config: MuZeroConfig
    model: MuZeroModel
    params: Any
    iteration: int


def load_board_network(run_dir: str, step: int | None = None) -> BoardNetwork:
    """The network of checkpoint ``step`` (default: the newest intact one) of a
    connect-four run of this example, the moving average where the run kept one
    (what its evaluations play); ``ValueError`` for a run of another game."""
    config = checkpoints.load_config(run_dir, MuZeroConfig)
    if config.game != "connect_four":
        raise ValueError(f"{run_dir!r} trained {config.game!r}; expected a connect_four run")
    graphdef, _, template = initial_state(config)
    ts = checkpoints.restore_checkpoint(run_dir, template, config, step=step)
    model = MuZeroModel(graphdef, discount=config.discount, zero_sum=config.zero_sum)
    params = ts.params if ts.ema_params is None else ts.ema_params
    return BoardNetwork(config, model, params, int(ts.iteration))


def network_agent(run_dir: str, step: int | None = None, num_simulations: int | None = None
                  ) -> tuple[Any, str, str]:
    """The greedy search of a board-game run of this example (``--run-dir``) with
    the network of checkpoint ``step`` (:func:`load_board_network`), as a
    :func:`jaxpuct.alphazero.arena.play_match` agent: ``(agent, game,
    description)``."""
    run = load_board_network(run_dir, step)
    n = run.config.num_simulations if num_simulations is None else num_simulations
    agent = board_game.arena_agent(dataclasses.replace(run.config, num_simulations=n),
                                   run.model, run.params)
    description = (f"jaxpuct MuZero ({run.config.policy}) of {run_dir} at iteration "
                   f"{run.iteration}, {n} simulations, greedy")
    return agent, run.config.game, description


def _redraw(run_dir: str, log) -> None:
    """``metrics.png`` of the run so far (:mod:`examples.muzero_plot`); a run
    without matplotlib goes on without it."""
    try:
        from examples import muzero_plot
        muzero_plot.plot(run_dir)
    except ImportError as err:
        log(f"metrics.png not drawn: {err}")


def run(config: MuZeroConfig, iterations: int, run_dir: str | None = None, log=print,
        eval_every: int = 10, checkpoint_every: int = 0, resume: bool = False,
        keep_checkpoints: int = 2,
        max_minutes: float = 0.0, eval_games: int = 64, eval_simulations: int = 256,
        opponent_simulations: int = 1000, extra_eval_simulations: tuple[int, ...] = (),
        devices: Sequence[Any] | None = None) -> dict:
    """Runs ``config`` up to iteration ``iterations`` (or ``max_minutes`` of
    self-play and training in this process); returns the last evaluation's
    metrics. ``extra_eval_simulations``: 2048's and tic-tac-toe's evaluations
    are also made at each of these simulation counts (``eval_at_S`` in the row).
    ``keep_checkpoints``: the newest checkpoints kept (>= 1). ``devices``: the
    devices self-play and training are split over (:class:`Placement`; default
    all of ``jax.devices()``)."""
    if keep_checkpoints < 1:
        raise ValueError(f"keep_checkpoints must be >= 1 (the newest checkpoint is always "
                         f"kept), got {keep_checkpoints!r}.")
    lock = None
    if run_dir is not None:
        os.makedirs(run_dir, exist_ok=True)
        lock = rundir.acquire(run_dir)
    is_2048, is_board = config.game == "2048", config.game == "connect_four"
    placement = Placement.over(config, devices)
    graphdef, optimizer, ts = initial_state(config)
    ts = placement.place(ts)
    model = make_model(config, graphdef)
    if resume:
        if run_dir is None:
            raise SystemExit("error: --resume needs --run-dir")
        ts = checkpoints.restore_checkpoint(run_dir, ts, config)
        log(f"resumed from iteration {int(ts.iteration)}")
    # The episodes come from split games; the buffer they go to stays replicated.
    write = jax.jit(replay.write_episodes, out_shardings=placement.replicated)
    start, last, busy = time.time(), {}, 0.0
    params, opt_state, buffer, target = ts.params, ts.opt_state, ts.buffer, ts.target_params
    boards, ema = ts.boards, ts.ema_params
    key = jax.random.wrap_key_data(ts.rng)
    first = int(ts.iteration) + 1
    try:
        for iteration in range(first, iterations + 1):
            play_key, train_key, key = jax.random.split(key, 3)
            tic = time.process_time()
            if is_board:
                boards, board_segment = board_game.play_segment(config, model, params, boards,
                                                                play_key)
                games = board_segment.write_kwargs()
                lengths = np.asarray(board_segment.final_plies)
                decisive = np.asarray(board_segment.final_reward)[lengths > 0] != 0
                stats = {"env_steps": iteration * config.batch_size * config.segment_length,
                         "games_ended": int((lengths > 0).sum()),
                         "game_plies": (round(float(lengths[lengths > 0].mean()), 1)
                                        if (lengths > 0).any() else None),
                         "draw_rate": (round(float(1.0 - decisive.mean()), 3)
                                       if decisive.size else None)}
            elif is_2048:
                boards, segment = game_2048.play_segment(config, model, params, boards,
                                                         play_key)
                games = segment.write_kwargs()
                finished = np.asarray(segment.final_score)
                finished = finished[np.isfinite(finished)]
                stats = {"env_steps": iteration * config.batch_size * config.segment_length,
                         "games_ended": int(finished.size),
                         "selfplay_score": (round(float(finished.mean()), 1)
                                            if finished.size else None)}
            else:
                games = selfplay.play_games(config, model, params, play_key,
                                            batch_sharding=placement.batch)._asdict()
                decisive = np.asarray(jnp.any(games["reward"] != 0, axis=1))
                stats = {"draw_rate": float(1.0 - decisive.mean())}
            priority = None
            if config.priority_alpha > 0:
                priority = replay.trajectory_priorities(
                    games["reward"], games["root_value"], games["episode_end"],
                    games["written"], config.signed_discount, config.td_steps,
                    games.get("truncated"), games.get("truncation_value"))
            buffer = write(buffer, **games, priority=priority)
            params, opt_state, buffer, metrics, target = train(
                config, graphdef, optimizer, params, opt_state, buffer, train_key, target,
                jnp.int32((iteration - 1) * config.train_steps), placement.batch)
            if config.ema_decay:
                ema = _polyak_average(ema, params, config.ema_decay)
            jax.block_until_ready(params)
            busy += time.process_time() - tic
            row = {"iteration": iteration, "seconds": round(time.time() - start, 1),
                   "cpu_seconds": round(time.process_time(), 1),
                   "train_cpu_seconds": round(busy, 1), **stats,
                   **{k: round(float(v), 4) for k, v in metrics.items()}}
            out_of_time = bool(max_minutes) and busy >= 60.0 * max_minutes
            # The evaluated agent: the moving average when there is one.
            agent_params = ema if config.ema_decay else params
            evaluate = (eval_every and iteration % eval_every == 0) or (
                iteration == iterations) or out_of_time
            if evaluate and is_board:
                row.update(evaluate_against_mcts(config, model, agent_params,
                                                 config.seed + iteration,
                                                 eval_games, eval_simulations,
                                                 opponent_simulations))
                last = row
            elif evaluate and is_2048:
                eval_key = jax.random.fold_in(play_key, 1)
                row.update(selfplay.evaluate_at_counts(
                    config, extra_eval_simulations, functools.partial(
                        game_2048.evaluate, model=model, params=agent_params, key=eval_key,
                        num_games=eval_games)))
                last = row
            elif evaluate:
                eval_key = jax.random.fold_in(play_key, 1)
                row.update(selfplay.evaluate_at_counts(
                    config, extra_eval_simulations, functools.partial(
                        selfplay.evaluate_board, model=model, params=agent_params,
                        key=eval_key)))
                last = row
            log(json.dumps(row))
            if run_dir is not None:
                with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
                    f.write(json.dumps(row) + "\n")
                if evaluate:
                    _redraw(run_dir, log)
                if (checkpoint_every and iteration % checkpoint_every == 0) or (
                        iteration == iterations) or out_of_time:
                    checkpoints.save_checkpoint(run_dir, TrainState(
                        params=params, opt_state=opt_state, buffer=buffer,
                        iteration=jnp.asarray(iteration, jnp.int32),
                        rng=jax.random.key_data(key), target_params=target, boards=boards,
                        ema_params=ema),
                        config, keep=keep_checkpoints)
            if out_of_time:
                break
    finally:
        if lock is not None:
            lock.release()
    return last


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(game_defaults(argv))
    args = parser.parse_args(argv)
    if args.eval_games < 1:
        parser.error(f"--eval-games must be >= 1, got {args.eval_games}")
    if args.extra_eval_simulations and args.game == "connect_four":
        parser.error("--extra-eval-simulations is for games 2048 and tic_tac_toe; connect_four "
                     "evaluates at --eval-simulations")
    # A schedule without its horizon decays over this run's --iterations.
    config = config_lib.from_namespace(MuZeroConfig, args).with_decay_over(args.iterations)
    try:
        Placement.over(config)
    except ValueError as err:
        parser.error(str(err))
    run(config, args.iterations, args.run_dir, eval_every=args.eval_every,
        checkpoint_every=args.checkpoint_every, resume=args.resume,
        keep_checkpoints=args.keep_checkpoints,
        max_minutes=args.max_minutes, eval_games=args.eval_games,
        eval_simulations=args.eval_simulations,
        opponent_simulations=args.opponent_simulations,
        extra_eval_simulations=args.extra_eval_simulations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
