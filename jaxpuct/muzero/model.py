"""A MuZero network as the search's ``root`` and ``recurrent_fn``.

The search never sees the environment below the root: the root is the
representation of the real observation, with the environment's legal mask, and
every edge below it runs the learned dynamics and prediction (Schrittwieser et
al. 2020, "MuZero Algorithm"). So:

* ``legal_action_mask`` only at the root (``RootFnOutput``); below it every
  action is legal (``RecurrentFnOutput.legal_action_mask`` is left out), as in
  the paper, which "does not mask" inside the tree;
* no ``terminal`` flag: the model does not know where a game ends; past an end it
  is trained to an absorbing state (reward 0, value 0; :mod:`.targets`), so the
  search may walk past it;
* ``discount = gamma`` for one-player tasks and ``-gamma`` for two-player
  zero-sum games, whose rewards and values are from the view of the player to
  move (the convention of :mod:`jaxpuct.types`).

Selection: jaxpuct's default ``PUCTConfig`` is written for AlphaZero's exact
values in ``[-1, 1]`` and is wrong for a learned model in two ways:
``unvisited_q="fpu"`` subtracts a reduction (0.2) measured in value units, and
``q_normalization="none"`` adds Q to the exploration term unscaled, so for
rewards of any other scale the balance between Q and the prior depends on the
reward unit. :func:`muzero_puct_config` is ``PUCTConfig.mctx_muzero()``:
the AlphaZero log schedule (``c1 = 1.25``, ``c2 = 19652``, the paper's
appendix B) with the node's own visit count as the pseudocode has it, Q
min-max normalised, and unvisited actions at the bottom of that range (the
pseudocode's ``value_score = 0`` for an unvisited child). One difference stays:
jaxpuct's min-max bounds are per node (the node's value and its visited
children's ``Q(s, a) = r + gamma v``), as mctx's ``muzero_policy`` does
(``qtransform_by_parent_and_siblings``); the pseudocode's ``MinMaxStats`` are
one pair of bounds for the whole tree, which
``muzero_puct_config(minmax_bounds="tree")`` gives (an engine extension that
updates them in O(1) per backed-up edge).

``gumbel_policy`` needs nothing special: its completed Q is min-max rescaled by
default (``CompletedQConfig.rescale_values``), which is what makes it fit a
learned model's values (Danihelka et al. 2022).

Under ``jit``: close over the :class:`MuZeroModel` (it is static and hashable)
and pass the network's state as ``params``::

    model = MuZeroModel(graphdef, discount=0.997)
    root = model.root(state, obs, legal)
    out = jaxpuct.alphazero_policy(state, key, root, model.recurrent_fn, 32,
                                   selection=muzero_puct_config())
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from jaxpuct.muzero.networks import MuZeroNetwork, head_scalar
from jaxpuct.selection import MinMaxBounds, PUCTConfig
from jaxpuct.types import RecurrentFnOutput, RootFnOutput

__all__ = ["MuZeroModel", "muzero_puct_config"]


def network_root(net: Any, obs: jax.Array, legal_action_mask: jax.Array | None
                 ) -> RootFnOutput:
    """``h`` then ``f`` on ``obs [B, ...]`` for any network with ``represent`` and
    ``predict`` (MuZero's and Stochastic MuZero's): ``prior_logits [B, A]``,
    ``value [B]`` (scalar), the latent as embedding, the mask as given."""
    latent = net.represent(obs)
    logits, value = net.predict(latent)
    return RootFnOutput(prior_logits=logits, value=head_scalar(value, net.config.value),
                        embedding=latent, legal_action_mask=legal_action_mask)


def muzero_puct_config(c_init: float = 1.25, c_base: float = 19652.0,
                       minmax_bounds: MinMaxBounds = "node") -> PUCTConfig:
    """The PUCT rule for a learned model (module docstring): ``PUCTConfig.mctx_muzero``;
    ``minmax_bounds="tree"``: one pair of min-max bounds per search (the pseudocode's)."""
    return PUCTConfig.mctx_muzero(c_init=c_init, c_base=c_base,
                                  minmax_bounds=minmax_bounds)


@dataclasses.dataclass(frozen=True)
class MuZeroModel:
    """A split :class:`.networks.MuZeroNetwork` and the task's discount (static; hashable).

    Attributes:
      graphdef: the network's structure (``nnx.split(network)[0]``); the state
        (``nnx.split(network)[1]``) is the ``params`` of every method.
      discount: ``gamma`` in ``(0, 1]`` between a reward and the next value.
      zero_sum: two players alternate: the search's discount is ``-gamma``.
    """

    graphdef: nnx.GraphDef
    discount: float = 1.0
    zero_sum: bool = False

    def __post_init__(self):
        if not 0.0 < self.discount <= 1.0:
            raise ValueError(f"MuZeroModel.discount must be in (0, 1], got {self.discount!r}.")

    @property
    def search_discount(self) -> float:
        """The ``RecurrentFnOutput.discount``: ``gamma``, or ``-gamma`` if zero-sum."""
        return -self.discount if self.zero_sum else self.discount

    def network(self, params: Any) -> MuZeroNetwork:
        """The network with ``params`` (``nnx.merge``; pure under ``jit``)."""
        return nnx.merge(self.graphdef, params)

    def root(self, params: Any, obs: jax.Array,
             legal_action_mask: jax.Array | None = None) -> RootFnOutput:
        """The search's root of observations ``obs [B, ...]``.

        Returns:
          ``RootFnOutput``: ``prior_logits [B, A]``, ``value [B]`` (scalar),
          ``embedding`` the latent ``[B, ...]``, and ``legal_action_mask [B, A]``
          as given (``None``: every action legal).
        """
        return network_root(self.network(params), obs, legal_action_mask)

    def recurrent_fn(self, params: Any, rng_key: jax.Array, action: jax.Array,
                     embedding: jax.Array) -> tuple[RecurrentFnOutput, jax.Array]:
        """The search's ``recurrent_fn``: dynamics then prediction on ``action [B]``
        (``[B, D]`` vectors of a continuous space, from ``jaxpuct.sampled_policy``)
        from latents ``embedding [B, ...]``; no legal mask and no terminal flag
        (module docstring)."""
        del rng_key  # the model is deterministic
        net = self.network(params)
        reward, latent = net.dynamics(embedding, action)
        logits, value = net.predict(latent)
        output = RecurrentFnOutput(
            reward=head_scalar(reward, net.config.reward),
            discount=jnp.full(action.shape[:1], self.search_discount, jnp.float32),
            prior_logits=logits,
            value=head_scalar(value, net.config.value))
        return output, latent
