"""A Stochastic MuZero network as the search's root and its two recurrent functions.

The contract is that of :func:`jaxpuct.stochastic_policy` (and of
``mctx.stochastic_muzero_policy``): a decision node holds a latent, a chance
node an afterstate (Antonoglou et al. 2022, section 4):

* ``decision_recurrent_fn(params, key, action [B], latent)``: afterstate
  dynamics ``phi`` then afterstate prediction ``psi``, giving
  ``DecisionRecurrentFnOutput(chance_logits = sigma [B, C], afterstate_value = Q
  [B])`` and the afterstate;
* ``chance_recurrent_fn(params, key, code [B], afterstate)``: dynamics ``g`` on
  the one-hot of the code index, then prediction ``f``, giving
  ``ChanceRecurrentFnOutput(action_logits [B, A], value [B], reward [B],
  discount [B])`` and the next latent.

As for :class:`.model.MuZeroModel`: the legal mask only at the root, no terminal
flag (the model is trained to an absorbing state past an episode's end), and the
chance function's discount is ``gamma`` (one player) or ``-gamma`` (two players
taking turns; the afterstate value is from the view of the player who acted,
as the contract wants). The chance outcomes the search walks are the learned
codes; codes the prior gives a tiny probability are still selectable (the quota
rule only skips ``p = 0``, which a softmax never gives).

Search it with :func:`jaxpuct.stochastic_policy` and
:func:`.model.muzero_puct_config` at decision nodes, or with
:func:`jaxpuct.stochastic_gumbel_policy` (a Gumbel root over chance nodes)::

    model = StochasticMuZeroModel(graphdef, discount=0.997)
    root = model.root(params, obs, legal)
    out = jaxpuct.stochastic_policy(params, key, root, model.decision_recurrent_fn,
                                    model.chance_recurrent_fn, 32,
                                    selection=muzero_puct_config())
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from jaxpuct.muzero.model import network_root
from jaxpuct.muzero.networks import head_scalar
from jaxpuct.muzero.stochastic_networks import StochasticMuZeroNetwork
from jaxpuct.stochastic import ChanceRecurrentFnOutput, DecisionRecurrentFnOutput
from jaxpuct.types import RootFnOutput

__all__ = ["StochasticMuZeroModel"]


@dataclasses.dataclass(frozen=True)
class StochasticMuZeroModel:
    """A split :class:`.stochastic_networks.StochasticMuZeroNetwork` and the task's
    discount (static; hashable; close over it under ``jit``).

    Attributes:
      graphdef: the network's structure; its state is every method's ``params``.
      discount: ``gamma`` in ``(0, 1]``.
      zero_sum: two players alternate: the chance function's discount is ``-gamma``.
    """

    graphdef: nnx.GraphDef
    discount: float = 1.0
    zero_sum: bool = False

    def __post_init__(self):
        if not 0.0 < self.discount <= 1.0:
            raise ValueError(f"StochasticMuZeroModel.discount must be in (0, 1], got "
                             f"{self.discount!r}.")

    def network(self, params: Any) -> StochasticMuZeroNetwork:
        """The network with ``params`` (``nnx.merge``; pure under ``jit``)."""
        return nnx.merge(self.graphdef, params)

    def root(self, params: Any, obs: jax.Array,
             legal_action_mask: jax.Array | None = None) -> RootFnOutput:
        """The root of observations ``obs [B, ...]``: ``prior_logits [B, A]``,
        ``value [B]``, the latent ``[B, L]`` as embedding, the mask as given."""
        return network_root(self.network(params), obs, legal_action_mask)

    def decision_recurrent_fn(self, params: Any, rng_key: jax.Array, action: jax.Array,
                              latent: jax.Array
                              ) -> tuple[DecisionRecurrentFnOutput, jax.Array]:
        """``phi`` then ``psi`` on ``action [B]`` from ``latent [B, L]``."""
        del rng_key  # the model is deterministic
        net = self.network(params)
        afterstate = net.afterstate_dynamics(latent, action)
        code_logits, q = net.afterstate_predict(afterstate)
        return (DecisionRecurrentFnOutput(chance_logits=code_logits,
                                          afterstate_value=head_scalar(q, net.config.value)),
                afterstate)

    def chance_recurrent_fn(self, params: Any, rng_key: jax.Array, code: jax.Array,
                            afterstate: jax.Array
                            ) -> tuple[ChanceRecurrentFnOutput, jax.Array]:
        """``g`` on the one-hot of ``code [B]`` from ``afterstate [B, L]``, then ``f``."""
        del rng_key
        net = self.network(params)
        one_hot = jax.nn.one_hot(code, net.num_codes, dtype=afterstate.dtype)
        reward, latent = net.dynamics(afterstate, one_hot)
        logits, value = net.predict(latent)
        discount = -self.discount if self.zero_sum else self.discount
        return (ChanceRecurrentFnOutput(
            action_logits=logits, value=head_scalar(value, net.config.value),
            reward=head_scalar(reward, net.config.reward),
            discount=jnp.full(code.shape, discount, jnp.float32)), latent)
