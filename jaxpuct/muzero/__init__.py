"""MuZero: search with a learned model (Schrittwieser et al. 2020), in JAX.

Imports Flax and optax; ``import jaxpuct`` alone does not load this package
(``jaxpuct.muzero`` is loaded on first use). The search is jaxpuct's own: the
model enters it only as a ``root`` and a ``recurrent_fn`` (:mod:`.model`), so
``alphazero_policy``, ``gumbel_policy`` and the engine's options apply
unchanged. What can be shared with :mod:`jaxpuct.alphazero` is imported from
there, not copied: its residual blocks, its weight-decay mask, its command-line
generator and its run-dir lock (its checkpoints are typed to its own config: not
used yet).

Modules, one job each:

* :mod:`.value_transform`: ``h(x)`` of Pohlen et al. 2018 and its exact inverse,
  the categorical support, two-hot projection and expectation;
* :mod:`.networks`: representation ``h``, dynamics ``g`` and prediction ``f``
  (MLP and ResNet), latent min-max scaling, categorical or ``tanh`` heads;
* :mod:`.model`: the network as ``root`` / ``recurrent_fn``, and the PUCT rule
  for learned values (:func:`.model.muzero_puct_config`);
* :mod:`.replay`: a ring buffer of trajectory steps on the device, with uniform
  or prioritised sampling of ``K``-step windows;
* :mod:`.targets`: ``n``-step bootstrapped values, reward and policy targets of
  an unroll, with absorbing steps past an episode's end;
* :mod:`.training`: the unrolled loss with MuZero's gradient scaling and the
  optax train step;
* :mod:`.reanalyse`: fresh policy and value targets for a share of a batch,
  from a new search at the stored observations (Schrittwieser et al. 2021);
* :mod:`.config` (a run's :class:`.config.MuZeroConfig`, whose command line is
  generated) and :mod:`.selfplay` (lockstep tic-tac-toe games and the minimax
  evaluation), used by ``examples/muzero.py``.

Later, Stochastic MuZero (Antonoglou et al. 2022): its afterstate dynamics
``phi(s, a) -> as``, afterstate prediction ``psi(as) -> (sigma, Q)`` and
dynamics ``g(as, c) -> (s', r)`` are three more methods of a network with the
same heads, and :class:`.model.MuZeroModel`'s counterpart would return them as
the ``decision_recurrent_fn`` / ``chance_recurrent_fn`` pair that
:func:`jaxpuct.stochastic_policy` already takes. The chance encoder ``e(o)``
(a one-hot code with a straight-through gradient) needs one more replay field
(the next observation, already stored as the next step) and three loss terms
beside those of :mod:`.training`; the unroll, the targets and the buffer stay.
"""

from jaxpuct.muzero.model import MuZeroModel, muzero_puct_config
from jaxpuct.muzero.networks import MuZeroNetwork, NetworkConfig, init_network
from jaxpuct.muzero.reanalyse import reanalyse_batch
from jaxpuct.muzero.replay import Batch, TrajectoryBuffer
from jaxpuct.muzero.targets import UnrollTargets
from jaxpuct.muzero.training import LossConfig, train_step, unroll_loss
from jaxpuct.muzero.value_transform import Support, h, h_inverse

__all__ = [
    "Batch",
    "LossConfig",
    "MuZeroModel",
    "MuZeroNetwork",
    "NetworkConfig",
    "Support",
    "TrajectoryBuffer",
    "UnrollTargets",
    "h",
    "h_inverse",
    "init_network",
    "muzero_puct_config",
    "reanalyse_batch",
    "train_step",
    "unroll_loss",
]
