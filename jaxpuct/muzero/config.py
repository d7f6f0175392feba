"""What a MuZero run computes, as one frozen dataclass; its command line is generated.

The flags of ``examples/muzero.py`` are the fields of :class:`MuZeroConfig`, made
by :func:`jaxpuct.alphazero.config.add_arguments` (the AlphaZero example's
generator, shared), with the ``Attributes`` text as help.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from jaxpuct.muzero.networks import ACTION_ENCODINGS, ActionEncoding, NetworkConfig
from jaxpuct.muzero.stochastic_training import StochasticLossConfig
from jaxpuct.muzero.training import LR_SCHEDULES, LossConfig

__all__ = ["GAMES", "MODELS", "POLICIES", "MuZeroConfig"]

GAMES = ("tic_tac_toe", "connect_four", "2048")
GAME_ACTIONS = {"tic_tac_toe": 9, "connect_four": 7, "2048": 4}
# The longest game of a two-player game, in plies (2048 has no such bound).
GAME_PLIES = {"tic_tac_toe": 9, "connect_four": 42}
POLICIES = ("gumbel", "alphazero", "sampled")
# The learned model: MuZero's (Schrittwieser et al. 2020) or Stochastic MuZero's,
# with afterstates and chance codes (Antonoglou et al. 2022).
MODELS = ("muzero", "stochastic")


def _choice(default, choices):
    return dataclasses.field(default=default, metadata={"choices": choices})


def _at_least(default, minimum):
    return dataclasses.field(default=default, metadata={"minimum": minimum})


@dataclasses.dataclass(frozen=True)
class MuZeroConfig:
    """What a MuZero self-play and training run computes (hashable; saved with its
    checkpoints, and checked on resume). How long it runs and how often it is
    evaluated or saved are the example's own flags.

    Attributes:
      game: the game: tic_tac_toe (jaxpuct.testing.tictactoe's JAX rules; two
        players, whole games per iteration), connect_four (pgx's rules; two
        players, segment_length moves of every game per iteration,
        jaxpuct.muzero.board_game) or 2048 (pgx's rules through
        jaxpuct.envs.pgx_2048; one player, segment_length moves of every board
        per iteration, jaxpuct.muzero.game_2048).
      seed: PRNG seed of the run.
      batch_size: games played in lockstep per iteration (tic-tac-toe: each to
        its end; 2048: boards kept across iterations).
      segment_length: 2048 and connect_four: moves of every game per iteration
        (a game still running at the end is written truncated, bootstrapped with
        the model's value); unused by tic-tac-toe.
      num_simulations: simulations per move.
      temperature_moves: plies of each self-play game whose move is sampled (from
        the visit distribution; Gumbel: with the Gumbel draw), then the greedy
        move (most visited; Gumbel: no draw), as AlphaZero's self-play and the
        MuZero pseudocode's board games; the policy target stays the search's
        full distribution at every ply, the root noise stays. -1: every ply
        samples. Two-player games only (2048 samples every move).
      model: muzero (MuZero's model, jaxpuct.muzero.networks) or stochastic
        (Stochastic MuZero, Antonoglou et al. 2022: afterstates and num_codes
        learned chance codes, jaxpuct.muzero.stochastic_networks; searched by
        stochastic_policy with --policy alphazero, stochastic_gumbel_policy with
        --policy gumbel; trained by stochastic_training). stochastic: game 2048,
        policy gumbel or alphazero, no symmetry augmentation.
      num_codes: C, the chance codes of the stochastic model (32, the paper's
        for 2048); unused by muzero.
      chance_codes: learned (the chance encoder's codes, the paper's) or true
        (each transition's true chance outcome as its code, a spawn's cell and
        tile, jaxpuct.muzero.game_2048.spawn_outcome; num_codes 32; the encoder
        is not trained: LightZero's 2048 recipe); unused by muzero.
      policy: gumbel (gumbel_policy, completed-Q target), alphazero (PUCT with
        muzero_puct_config, visit target, Dirichlet noise at the root) or sampled
        (Sampled MuZero: sampled_policy with muzero_puct_config over num_samples
        actions drawn at each node, its visit target over them, stored with their
        ids).
      num_samples: K, actions sampled at each node by the sampled policy (at most
        the game's actions, 9 for tic-tac-toe); unused by the others.
      network_kind: mlp (dense layers on the flattened observation) or resnet
        (convolutional towers over the board, latent [H, W, channels]: connect
        four's [6, 7, 2] planes; 2048's board read as [4, 4, 18], one plane per
        tile exponent, as LightZero reads it).
      hidden: widths of each MLP function's dense layers (resnet: the hidden
        layer of the value and reward heads, first entry).
      latent_size: features of an MLP latent state.
      channels: channels of a ResNet latent.
      num_blocks: residual blocks in each ResNet function.
      value_support: n of a categorical value head over h-transformed atoms
        -n..n; 0: a tanh scalar head (values in [-1, 1], board games).
      reward_support: the same for the reward head.
      unroll_steps: K, steps the model is unrolled in training.
      td_steps: n of the n-step value target (>= the game's length: Monte Carlo
        returns).
      discount: gamma between a reward and the next value (board games: 1).
      buffer_size: steps the replay buffer holds.
      train_batch_size: unrolls per optimiser step.
      train_steps: optimiser steps per iteration.
      learning_rate: Adam's step size (its start under a schedule).
      lr_schedule: constant, or cosine: a decay of the step size from
        learning_rate to lr_final_fraction x learning_rate over lr_decay_steps
        optimiser steps, constant after (Loshchilov and Hutter 2017, SGDR,
        without restarts).
      lr_decay_steps: horizon of the cosine decay in optimiser steps; 0: the
        example sets it to --iterations x train_steps, so that the decay ends at
        the run's last iteration (a library caller gives it).
      lr_final_fraction: step size at the end of the cosine decay, as a fraction
        of learning_rate, in [0, 1].
      weight_decay: coupled L2 weight on kernels.
      ema_decay: d of an exponential moving average of the parameters, updated
        after each iteration's optimiser steps (average = d x average + (1 - d)
        x params, from the initial parameters; Polyak and Juditsky 1992), which
        the evaluations use; self-play acts with the current parameters. 0: no
        average, the evaluations use the current parameters.
      value_weight: weight of the value loss (0.25 as in MuZero Reanalyse).
      reward_weight: weight of the reward loss (1, the paper's).
      priority_alpha: prioritised replay exponent (0: uniform, as MuZero's board
        games).
      reanalyse_fraction: share of each training batch whose policy (and, when
        td_steps is below the game's length or the game is 2048, value) targets
        come from a new
        search with the current parameters (jaxpuct.muzero.reanalyse; 0: none,
        the stored targets only); with model stochastic, the chance-node
        search's.
      target_update_every: optimiser steps between copies of the parameters into
        the target network that reanalyse searches with (its policy targets and,
        with bootstrap, its value bootstraps); 0: no target network, reanalyse
        uses the current parameters.
      minmax_bounds: node (each node's own min-max Q bounds, as mctx) or tree (one
        pair per search, as the MuZero pseudocode's MinMaxStats); alphazero and
        sampled.
      symmetry_augment: move each training unroll by a symmetry of the board
        drawn per row (start observation, every action of the unroll and its
        policy targets together; jaxpuct.muzero.symmetry): tic_tac_toe's 8
        rotations and reflections, connect_four's left-right mirror.
      consistency_weight: weight of EfficientZero's temporal-consistency loss
        (Ye et al. 2021; jaxpuct.muzero.training.consistency_loss: each unrolled
        latent pulled towards the representation of the real next observation;
        EfficientZero's weight is 2); 0: none. Model muzero.
      projection_size: width of the projector and predictor that loss trains
        (unused at consistency_weight 0).
      action_encoding: how the resnet dynamics sees the action
        (jaxpuct.muzero.networks.action_planes): cell (a one on the action's
        square, the paper's board-game encoding), column (ones on the action's
        column: connect_four's drops; examples/muzero.py's connect_four default)
        or constant (one plane of ones per action: 2048's slides); unused by mlp.
    """

    game: str = _choice("tic_tac_toe", GAMES)
    seed: int = 0
    batch_size: int = _at_least(128, 1)
    segment_length: int = _at_least(200, 1)
    num_simulations: int = _at_least(16, 1)
    temperature_moves: int = _at_least(-1, -1)
    policy: str = _choice("gumbel", POLICIES)
    model: str = _choice("muzero", MODELS)
    num_codes: int = _at_least(32, 1)
    chance_codes: str = _choice("learned", ("learned", "true"))
    num_samples: int = _at_least(4, 1)
    network_kind: str = _choice("mlp", ("mlp", "resnet"))
    hidden: tuple[int, ...] = (64, 64)
    latent_size: int = _at_least(64, 1)
    channels: int = _at_least(32, 1)
    num_blocks: int = _at_least(2, 0)
    value_support: int = _at_least(0, 0)
    reward_support: int = _at_least(0, 0)
    unroll_steps: int = _at_least(5, 1)
    td_steps: int = _at_least(9, 1)
    discount: float = 1.0
    buffer_size: int = _at_least(20000, 16)
    train_batch_size: int = _at_least(128, 1)
    train_steps: int = _at_least(20, 0)
    learning_rate: float = 3e-3
    lr_schedule: str = _choice("constant", LR_SCHEDULES)
    lr_decay_steps: int = _at_least(0, 0)
    lr_final_fraction: float = _at_least(0.05, 0.0)
    weight_decay: float = 1e-4
    ema_decay: float = _at_least(0.0, 0.0)
    value_weight: float = 0.25
    reward_weight: float = _at_least(1.0, 0.0)
    priority_alpha: float = _at_least(0.0, 0.0)
    reanalyse_fraction: float = _at_least(0.0, 0.0)
    target_update_every: int = _at_least(0, 0)
    minmax_bounds: str = _choice("node", ("node", "tree"))
    symmetry_augment: bool = False
    consistency_weight: float = _at_least(0.0, 0.0)
    projection_size: int = _at_least(128, 1)
    action_encoding: str = _choice("cell", ACTION_ENCODINGS)

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            choices = field.metadata.get("choices")
            if choices is not None and value not in choices:
                raise ValueError(f"MuZeroConfig.{field.name} must be one of {choices}, got "
                                 f"{value!r}.")
            minimum = field.metadata.get("minimum")
            if minimum is not None and not value >= minimum:
                raise ValueError(f"MuZeroConfig.{field.name} must be >= {minimum}, got "
                                 f"{value!r}.")
        if not self.reanalyse_fraction <= 1.0:
            raise ValueError(f"MuZeroConfig.reanalyse_fraction must be in [0, 1], got "
                             f"{self.reanalyse_fraction!r}.")
        if self.num_samples > GAME_ACTIONS[self.game]:
            raise ValueError(f"MuZeroConfig.num_samples must be at most the game's "
                             f"{GAME_ACTIONS[self.game]} actions, got {self.num_samples!r}.")
        if not self.lr_final_fraction <= 1.0:
            raise ValueError(f"MuZeroConfig.lr_final_fraction must be in [0, 1], got "
                             f"{self.lr_final_fraction!r}.")
        if not self.ema_decay < 1.0:
            raise ValueError(f"MuZeroConfig.ema_decay must be in [0, 1), got "
                             f"{self.ema_decay!r}.")
        if not 0.0 < self.discount <= 1.0:
            raise ValueError(f"MuZeroConfig.discount must be in (0, 1], got {self.discount!r}.")
        if self.symmetry_augment:
            from jaxpuct.muzero.symmetry import check_game
            check_game(self.game)
        if self.model == "stochastic":
            self._check_stochastic()
        if self.action_encoding == "column" and self.game != "connect_four":
            raise ValueError(f"MuZeroConfig.action_encoding 'column' is for a game whose "
                             f"actions are columns (connect_four), got game {self.game!r}.")
        if self.temperature_moves >= 0 and not self.zero_sum:
            raise ValueError(f"MuZeroConfig.temperature_moves counts the plies of a "
                             f"two-player game ({', '.join(GAME_PLIES)}); game "
                             f"{self.game!r} samples every move (-1), got "
                             f"{self.temperature_moves!r}.")
        if self.network_kind == "resnet" and self.game == "tic_tac_toe":
            raise ValueError("MuZeroConfig.network_kind 'resnet' needs a board observation "
                             "[H, W, C] (games connect_four and 2048), got game "
                             "'tic_tac_toe'.")

    def _check_stochastic(self) -> None:
        """Refuses what the stochastic model's loop does not do (yet), naming the
        argument: the other games, the sampled policy (no sampled search over
        chance nodes), the ResNet, symmetry augmentation (it would have to move
        the windows' observations and the chance codes learned from them)."""
        refusals = (
            ("game", self.game != "2048", "2048"),
            ("policy", self.policy not in ("gumbel", "alphazero"), "gumbel or alphazero"),
            ("symmetry_augment", self.symmetry_augment, "False"),
            ("num_codes", self.chance_codes == "true" and self.num_codes != 32,
             "32, the 2048 spawn outcomes, with chance_codes 'true'"),
            ("consistency_weight", self.consistency_weight > 0, "0"))
        for name, refused, supported in refusals:
            if refused:
                raise ValueError(f"MuZeroConfig.{name} {getattr(self, name)!r} is not supported "
                                 f"with model 'stochastic' (supported: {supported}).")

    @property
    def network(self) -> NetworkConfig:
        """Scalar (tanh) heads by default: a board game's rewards and values lie in
        [-1, 1] (the paper trains board games with scalar MSE); categorical heads
        where a support is given (2048's scores)."""
        return NetworkConfig(kind="resnet" if self.network_kind == "resnet" else "mlp",
                             hidden=tuple(self.hidden), latent_size=self.latent_size,
                             channels=self.channels, num_blocks=self.num_blocks,
                             value_support=self.value_support or None,
                             reward_support=self.reward_support or None,
                             projection=self.projection_size if self.consistency_weight else 0,
                             action_encoding=cast(ActionEncoding, self.action_encoding))

    @property
    def zero_sum(self) -> bool:
        """Two players take turns (tic-tac-toe, connect four): the targets'
        discount is signed."""
        return self.game in GAME_PLIES

    @property
    def signed_discount(self) -> float:
        """``d`` of :mod:`.targets`: ``-gamma`` for two players, ``gamma`` for one."""
        return -self.discount if self.zero_sum else self.discount

    @property
    def max_plies(self) -> int | None:
        """The longest game of a two-player game, in plies (``None``: 2048)."""
        return GAME_PLIES.get(self.game)

    @property
    def num_actions(self) -> int:
        return GAME_ACTIONS[self.game]

    @property
    def loss(self) -> LossConfig:
        """The loss and optimiser; a cosine schedule needs ``lr_decay_steps`` set
        (:meth:`with_decay_over`), else ``LossConfig`` refuses it."""
        return LossConfig(value_weight=self.value_weight, reward_weight=self.reward_weight,
                          learning_rate=self.learning_rate,
                          weight_decay=self.weight_decay, lr_schedule=self.lr_schedule,
                          lr_decay_steps=self.lr_decay_steps,
                          lr_final_fraction=self.lr_final_fraction,
                          consistency_weight=self.consistency_weight)

    @property
    def stochastic_loss(self) -> StochasticLossConfig:
        """The stochastic model's loss: :attr:`loss` with the afterstate value, code
        prior and commitment terms at :class:`.stochastic_training.StochasticLossConfig`'s
        defaults; the true spawn outcomes as the codes with ``chance_codes = 'true'``."""
        if self.chance_codes == "true":
            from jaxpuct.muzero.game_2048 import spawn_outcome  # it imports this module
            return StochasticLossConfig(base=self.loss, chance_outcome=spawn_outcome)
        return StochasticLossConfig(base=self.loss)

    def with_decay_over(self, iterations: int) -> MuZeroConfig:
        """This config with a schedule's unset horizon (``lr_decay_steps = 0``) set
        to ``iterations x train_steps`` optimiser steps, so that the decay ends at
        iteration ``iterations``; unchanged for a constant step size or a set
        horizon (the saved config then holds the horizon, and a resume checks it)."""
        if self.lr_schedule == "constant" or self.lr_decay_steps:
            return self
        if not iterations * self.train_steps >= 1:
            raise ValueError(f"MuZeroConfig.lr_decay_steps: a {self.lr_schedule!r} schedule "
                             f"over {iterations!r} iterations of {self.train_steps!r} "
                             f"optimiser steps has no step to decay over.")
        return dataclasses.replace(self, lr_decay_steps=iterations * self.train_steps)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> MuZeroConfig:
        """The inverse of :meth:`to_json` (JSON has no tuples)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown MuZeroConfig fields {sorted(unknown)}")
        return cls(**{**data, "hidden": tuple(data.get("hidden", cls.hidden))})
