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
* :mod:`.symmetry`: tic-tac-toe's 8 board symmetries and connect four's mirror
  applied to whole training unrolls (observation, actions and policy targets together);
* :mod:`.config` (a run's :class:`.config.MuZeroConfig`, whose command line is
  generated) and :mod:`.selfplay` (lockstep tic-tac-toe games and the minimax
  evaluation), used by ``examples/muzero.py``.

Continuous actions (Sampled MuZero, Hubert et al. 2021): a ``MuZeroNetwork`` over
``jaxpuct.sampled.GaussianActions(D)`` takes action vectors ``[B, D]`` in its
dynamics and gives the Gaussian's parameters as its policy head, which
:func:`jaxpuct.sampled_policy` samples from; the buffer stores the vectors
(``empty_buffer(..., num_samples=K, action_dim=D)``) and the loss is the
likelihood of the weighted samples. Episodes cut by a time limit are written
``truncated``: their n-step targets bootstrap at the cut and nothing is trained
past it (:mod:`.targets`). ``examples/pendulum.py --model learned`` uses both.

Stochastic MuZero (Antonoglou et al. 2022): its afterstate dynamics
``phi(s, a) -> as``, afterstate prediction ``psi(as) -> (sigma, Q)``, dynamics
``g(as, c) -> (r, s')`` and the chance encoder ``e(o_t, o_{t+1})`` (a one-hot code
with a straight-through gradient), MLP and ResNet
(:mod:`.stochastic_networks`); the model as the ``decision_recurrent_fn`` /
``chance_recurrent_fn`` pair of :func:`jaxpuct.stochastic_policy` and
:func:`jaxpuct.stochastic_gumbel_policy` (:mod:`.stochastic_model`); the unrolled
loss with the afterstate-value, code-prior and commitment terms, a sampler that
adds each window's observations to :func:`.replay.sample`, and the train step
(:mod:`.stochastic_training`). The buffer and the targets are MuZero's, and so
is the loop: ``examples/muzero.py --game 2048 --model stochastic``
(``MuZeroConfig.model``; :func:`.selfplay.search_roots` searches a
:class:`.stochastic_model.StochasticMuZeroModel` with chance nodes).
"""

import jaxpuct.muzero._dependencies  # noqa: F401  (first: a missing extra is named)
from jaxpuct.muzero.model import MuZeroModel, muzero_puct_config
from jaxpuct.muzero.networks import MuZeroNetwork, NetworkConfig, init_network
from jaxpuct.muzero.reanalyse import reanalyse_batch
from jaxpuct.muzero.replay import Batch, TrajectoryBuffer
from jaxpuct.muzero.stochastic_model import StochasticMuZeroModel
from jaxpuct.muzero.stochastic_networks import StochasticMuZeroNetwork, init_stochastic_network
from jaxpuct.muzero.stochastic_training import (
    StochasticBatch,
    StochasticLossConfig,
    stochastic_train_step,
    stochastic_unroll_loss,
)
from jaxpuct.muzero.targets import UnrollTargets
from jaxpuct.muzero.training import LossConfig, train_step, unroll_loss
from jaxpuct.muzero.value_transform import Support, h, h_inverse

__all__ = [
    "Batch",
    "LossConfig",
    "MuZeroModel",
    "MuZeroNetwork",
    "NetworkConfig",
    "StochasticBatch",
    "StochasticLossConfig",
    "StochasticMuZeroModel",
    "StochasticMuZeroNetwork",
    "Support",
    "TrajectoryBuffer",
    "UnrollTargets",
    "h",
    "h_inverse",
    "init_network",
    "init_stochastic_network",
    "muzero_puct_config",
    "reanalyse_batch",
    "stochastic_train_step",
    "stochastic_unroll_loss",
    "train_step",
    "unroll_loss",
]
