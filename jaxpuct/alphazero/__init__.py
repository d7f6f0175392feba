"""AlphaZero-style training around the search: networks, self-play, training loop.

Imports Flax, optax and orbax; ``import jaxpuct`` alone does not load this package.

Modules, one job each: :mod:`.config` (what a run computes, and its command
line), :mod:`.buffer` (replay buffer), :mod:`.networks` (policy-value networks),
:mod:`.selfplay` (the lockstep self-play step), :mod:`.training` (loss and
optimiser step), :mod:`.evaluation` (opponents and evaluation games),
:mod:`.checkpoints` (orbax checkpoints with integrity checks), :mod:`.trainer`
(``jax.jit``, donation and the device mesh), :mod:`.distributed` (several processes),
:mod:`.arena` (matches against OpenSpiel's bots; imports ``pyspiel`` when used) and
:mod:`.scores` (match scores with intervals, Elo).
"""

import jaxpuct.alphazero._dependencies  # noqa: F401  (first: a missing extra is named)
from jaxpuct.alphazero.buffer import ReplayBuffer
from jaxpuct.alphazero.checkpoints import (
    CheckpointError,
    available_steps,
    load_config,
    restore_checkpoint,
    save_checkpoint,
)
from jaxpuct.alphazero.config import (
    LR_SCHEDULES,
    MAX_MOVES,
    NETWORKS,
    OPTIMIZERS,
    RunOptions,
    SelfPlayConfig,
)
from jaxpuct.alphazero.evaluation import Counts, play_vs
from jaxpuct.alphazero.selfplay import Games
from jaxpuct.alphazero.trainer import NonFiniteError, Trainer, TrainState

__all__ = [
    "LR_SCHEDULES",
    "MAX_MOVES",
    "NETWORKS",
    "OPTIMIZERS",
    "CheckpointError",
    "Counts",
    "Games",
    "NonFiniteError",
    "ReplayBuffer",
    "RunOptions",
    "SelfPlayConfig",
    "TrainState",
    "Trainer",
    "available_steps",
    "load_config",
    "play_vs",
    "restore_checkpoint",
    "save_checkpoint",
]
