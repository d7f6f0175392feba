"""Stochastic MuZero's learned functions in Flax NNX (MLP family).

Antonoglou, Schrittwieser, Ozair, Hubert and Silver, "Planning in Stochastic
Environments with a Learned Model", ICLR 2022, section 4. Beside MuZero's
representation ``h`` and prediction ``f`` (:mod:`.networks`), a step of the
environment is split at the *afterstate*, the state after the agent's action and
before the environment's chance event:

* afterstate dynamics ``phi(s, a) -> as``;
* afterstate prediction ``psi(as) -> (sigma, Q)``: logits of a prior over ``C``
  chance codes and the afterstate's value;
* dynamics ``g(as, c) -> (r, s')``: the reward and the next latent, given the
  afterstate and a one-hot code ``c [B, C]``;
* the chance encoder ``e(o_t, o_{t+1}) -> c``: a one-hot code of the observed
  transition, the argmax of a softmax, with a straight-through gradient (van den
  Oord et al. 2017, "Neural Discrete Representation Learning"; Bengio et al.
  2013 for the estimator): the forward pass is exactly one-hot, the backward pass
  is the softmax's. The paper's encoder reads the observations up to ``t + 1``;
  here it reads the pair ``(o_t, o_{t+1})`` concatenated, which is enough for a
  Markov environment.

Heads, supports and the latent min-max scaling are those of :mod:`.networks`
(reused, not copied): ``Q`` has the value head's support, the reward head the
reward support; afterstates are scaled to ``[0, 1]`` like latents. The two
families of :class:`.networks.NetworkConfig`:

* ``"mlp"``: latents and afterstates ``[B, L]``; the action (one-hot ``[B, A]``)
  and the code (``[B, C]``) are concatenated to their input; each function a
  :class:`.networks.Trunk`.
* ``"resnet"``: latents and afterstates ``[B, H, W, channels]`` over the
  observation's board ``[B, H, W, C_obs]``; each function a tower of MuZero's
  residual blocks (:mod:`.networks`'s, shared) with its convolutional heads. The
  action enters ``phi`` as MuZero's action planes (:func:`.networks.action_planes`,
  by ``NetworkConfig.action_encoding``); the code enters ``g`` as ``C`` constant
  planes, each the code's entry over the whole board (a code has no place on the
  board; MuZero encodes Atari's actions so, as constant planes). The encoder's
  tower reads the two observations stacked along the channels,
  ``[B, H, W, 2 C_obs]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from jaxpuct.muzero.networks import (
    NetworkConfig,
    Trunk,
    _ConvHead,
    _Tower,
    action_plane_count,
    action_planes,
    head_output,
    head_width,
    init_split,
    network_input,
    scale_latent,
)

__all__ = ["StochasticMuZeroNetwork", "commitment_loss", "init_stochastic_network",
           "straight_through_code"]


@jax.custom_vjp
def straight_through_code(logits: jax.Array) -> jax.Array:
    """``logits [B, C]`` -> the one-hot ``[B, C]`` of their argmax (exactly 0 and 1;
    lowest index on ties), whose gradient is that of ``softmax(logits)``."""
    return jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=logits.dtype)


def _straight_through_fwd(logits):
    return straight_through_code(logits), jax.nn.softmax(logits, axis=-1)


def _straight_through_bwd(probs, cotangent):
    # The softmax's vector-Jacobian product: sigma * (g - <g, sigma>).
    inner = jnp.sum(cotangent * probs, axis=-1, keepdims=True)
    return (probs * (cotangent - inner),)


straight_through_code.defvjp(_straight_through_fwd, _straight_through_bwd)


def commitment_loss(code: jax.Array, logits: jax.Array) -> jax.Array:
    """``||c - softmax(logits)||^2`` per row, ``[B, C] -> [B]``; the code ``c`` is a
    constant (its own gradient is stopped), so the term pulls the encoder's soft
    probabilities towards the code it emits (the paper's commitment cost)."""
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.sum((jax.lax.stop_gradient(code) - probs) ** 2, axis=-1)


class StochasticMuZeroNetwork(nnx.Module):
    """The six functions of one Stochastic MuZero model (MLP or ResNet).

    Args:
      config: a :class:`.networks.NetworkConfig` (``kind`` "mlp" or "resnet").
      num_actions: ``A``.
      num_codes: ``C``, chance codes (>= 1).
      obs_shape: one observation's shape: any shape for "mlp" (flattened),
        ``(H, W, C_obs)`` for "resnet".
      rngs: ``nnx.Rngs`` for the initialisation.

    Methods (``B`` any batch; observations are cast to float32; a latent or
    afterstate ``[B, S]`` is ``[B, L]`` (MLP) or ``[B, H, W, channels]`` (ResNet)):

    * ``represent(obs [B, *obs_shape]) -> latent [B, S]`` in ``[0, 1]``;
    * ``predict(latent) -> (policy logits [B, A], value)``;
    * ``afterstate_dynamics(latent, action [B] int) -> afterstate [B, S]`` in ``[0, 1]``;
    * ``afterstate_predict(afterstate) -> (code logits [B, C], Q)``;
    * ``dynamics(afterstate, code [B, C] float) -> (reward, next latent [B, S])``;
    * ``encode(obs [B, ...], next_obs [B, ...]) -> (code [B, C] one-hot, logits [B, C])``,
      the code straight-through (:func:`straight_through_code`);

    where ``value``, ``Q`` and ``reward`` are logits ``[B, 2n + 1]`` or ``tanh``
    scalars ``[B]`` (:func:`.networks.head_scalar` reads both).
    """

    def __init__(self, config: NetworkConfig, num_actions: int, num_codes: int,
                 obs_shape: Sequence[int] | int, *, rngs: nnx.Rngs):
        obs_shape = (obs_shape,) if isinstance(obs_shape, int) else tuple(obs_shape)
        for name, count in (("num_actions", num_actions), ("num_codes", num_codes)):
            if not isinstance(count, int) or count < 1:
                raise ValueError(f"{name} must be an int >= 1, got {count!r}.")
        self.config = config
        self.num_actions = num_actions
        self.num_codes = num_codes
        self.obs_shape = obs_shape
        if config.kind == "resnet":
            self._init_resnet(rngs)
            return
        hidden, size = config.hidden, config.latent_size
        features = math.prod(obs_shape)
        self.repr_trunk = Trunk(features, hidden, rngs=rngs)
        self.repr_out = nnx.Linear(hidden[-1], size, rngs=rngs)
        self.pred_trunk = Trunk(size, hidden, rngs=rngs)
        self.policy_out = nnx.Linear(hidden[-1], num_actions, rngs=rngs)
        self.value_out = nnx.Linear(hidden[-1], head_width(config.value), rngs=rngs)
        self.after_trunk = Trunk(size + num_actions, hidden, rngs=rngs)
        self.after_out = nnx.Linear(hidden[-1], size, rngs=rngs)
        self.after_pred_trunk = Trunk(size, hidden, rngs=rngs)
        self.code_out = nnx.Linear(hidden[-1], num_codes, rngs=rngs)
        self.q_out = nnx.Linear(hidden[-1], head_width(config.value), rngs=rngs)
        self.dyn_trunk = Trunk(size + num_codes, hidden, rngs=rngs)
        self.dyn_out = nnx.Linear(hidden[-1], size, rngs=rngs)
        self.reward_out = nnx.Linear(hidden[-1], head_width(config.reward), rngs=rngs)
        self.enc_trunk = Trunk(2 * features, hidden, rngs=rngs)
        self.enc_out = nnx.Linear(hidden[-1], num_codes, rngs=rngs)

    def _init_resnet(self, rngs: nnx.Rngs) -> None:
        """The towers and heads of the ResNet family (module docstring)."""
        config = self.config
        if len(self.obs_shape) != 3:
            raise ValueError(f"a 'resnet' network needs obs_shape (H, W, C), got "
                             f"{self.obs_shape!r}.")
        height, width, in_channels = self.obs_shape
        cells, channels, blocks = height * width, config.channels, config.num_blocks
        value_width, hidden = head_width(config.value), config.hidden[0]
        self.board = (height, width)
        self.action_plane_count = action_plane_count(self.num_actions, self.board,
                                                     config.action_encoding)
        self.repr_tower = _Tower(in_channels, channels, blocks, rngs=rngs)
        self.pred_tower = _Tower(channels, channels, blocks, rngs=rngs)
        self.policy_head = _ConvHead(cells, channels, 2, self.num_actions, None, rngs=rngs)
        self.value_head = _ConvHead(cells, channels, 1, value_width, hidden, rngs=rngs)
        self.after_tower = _Tower(channels + self.action_plane_count, channels, blocks,
                                  rngs=rngs)
        self.after_pred_tower = _Tower(channels, channels, blocks, rngs=rngs)
        self.code_head = _ConvHead(cells, channels, 2, self.num_codes, None, rngs=rngs)
        self.q_head = _ConvHead(cells, channels, 1, value_width, hidden, rngs=rngs)
        self.dyn_tower = _Tower(channels + self.num_codes, channels, blocks, rngs=rngs)
        self.reward_head = _ConvHead(cells, channels, 1, head_width(config.reward), hidden,
                                     rngs=rngs)
        self.enc_tower = _Tower(2 * in_channels, channels, blocks, rngs=rngs)
        self.enc_head = _ConvHead(cells, channels, 2, self.num_codes, None, rngs=rngs)

    @property
    def resnet(self) -> bool:
        return self.config.kind == "resnet"

    def _input(self, obs: jax.Array, name: str) -> jax.Array:
        """:func:`.networks.network_input` with this network's shape and kind."""
        return network_input(obs, self.obs_shape, self.config.kind, name)

    def represent(self, obs: jax.Array) -> jax.Array:
        x = self._input(obs, "observations")
        latent = self.repr_tower(x) if self.resnet else self.repr_out(self.repr_trunk(x))
        return scale_latent(latent, self.config.latent_epsilon)

    def predict(self, latent: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.resnet:
            y = self.pred_tower(latent)
            logits, value = self.policy_head(y), self.value_head(y)
        else:
            y = self.pred_trunk(latent)
            logits, value = self.policy_out(y), self.value_out(y)
        return logits, head_output(value, self.config.value)

    def afterstate_dynamics(self, latent: jax.Array, action: jax.Array) -> jax.Array:
        if self.resnet:
            planes = action_planes(action, self.num_actions, self.board,
                                   self.config.action_encoding).astype(latent.dtype)
            after = self.after_tower(jnp.concatenate([latent, planes], axis=-1))
        else:
            one_hot = jax.nn.one_hot(action, self.num_actions, dtype=latent.dtype)
            after = self.after_out(self.after_trunk(jnp.concatenate([latent, one_hot], -1)))
        return scale_latent(after, self.config.latent_epsilon)

    def afterstate_predict(self, afterstate: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.resnet:
            y = self.after_pred_tower(afterstate)
            logits, q = self.code_head(y), self.q_head(y)
        else:
            y = self.after_pred_trunk(afterstate)
            logits, q = self.code_out(y), self.q_out(y)
        return logits, head_output(q, self.config.value)

    def dynamics(self, afterstate: jax.Array, code: jax.Array) -> tuple[jax.Array, jax.Array]:
        if code.shape[-1] != self.num_codes or code.ndim != 2:
            raise ValueError(f"expected a code [B, {self.num_codes}] (one-hot floats), got "
                             f"shape {tuple(code.shape)}.")
        code = code.astype(afterstate.dtype)
        if self.resnet:
            # The code as C constant planes over the board (module docstring).
            planes = jnp.broadcast_to(code[:, None, None, :],
                                      (*afterstate.shape[:3], self.num_codes))
            nxt = self.dyn_tower(jnp.concatenate([afterstate, planes], axis=-1))
            reward = self.reward_head(nxt)
        else:
            y = self.dyn_trunk(jnp.concatenate([afterstate, code], -1))
            nxt, reward = self.dyn_out(y), self.reward_out(y)
        return (head_output(reward, self.config.reward),
                scale_latent(nxt, self.config.latent_epsilon))

    def encode(self, obs: jax.Array, next_obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        pair = jnp.concatenate([self._input(obs, "observations"),
                                self._input(next_obs, "next observations")], axis=-1)
        if self.resnet:
            logits = self.enc_head(self.enc_tower(pair))
        else:
            logits = self.enc_out(self.enc_trunk(pair))
        return straight_through_code(logits), logits


def init_stochastic_network(config: NetworkConfig, num_actions: int, num_codes: int,
                            obs_shape: Sequence[int] | int, key: int | jax.Array = 0
                            ) -> tuple[nnx.GraphDef, nnx.State]:
    """A new network, split: ``(graphdef, state)``; built as one jitted program,
    compiled once per configuration, as :func:`.networks.init_network` does."""
    shape = tuple(obs_shape) if isinstance(obs_shape, Sequence) else obs_shape
    return init_split(StochasticMuZeroNetwork, (config, num_actions, num_codes, shape), key)
