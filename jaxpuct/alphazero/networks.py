"""AlphaZero-style policy-value networks in Flax NNX, and a functional wrapper.

Two models, both mapping a batch of observations to ``(logits [B, A], value [B])``
with the value squashed into ``[-1, 1]`` by ``tanh`` and taken from the view of
the player to move (the convention of :mod:`jaxpuct.types`):

* :class:`ResNetPolicyValue`: the residual tower of AlphaGo Zero / AlphaZero
  (Silver et al. 2017, "Mastering the game of Go without human knowledge",
  Methods, "Neural network architecture"): a 3x3 convolution stem, ``num_blocks``
  residual blocks (conv-norm-ReLU-conv-norm, skip connection, ReLU), a policy head
  (1x1 conv, norm, ReLU, dense to ``A`` logits) and a value head (1x1 conv, norm,
  ReLU, dense hidden layer, ReLU, dense to 1, ``tanh``); the heads normalise
  their flattened ``H * W * c`` features (a LayerNorm over the 1 or 2 channels of
  one position alone would be constant). Observations
  ``[B, H, W, C]`` (channels last, the pgx layout).
* :class:`MLPPolicyValue`: a small multi-layer perceptron for tiny games such as
  tic-tac-toe; observations ``[B, F]`` (any trailing shape is flattened).

Normalisation. ``norm="layer"`` (the default) uses per-position LayerNorm over the
channels; ``norm="batch"`` uses BatchNorm as in the AlphaZero papers. LayerNorm is
the default because it behaves well in batched self-play: it has no running
statistics, so (i) the network computes the same function in training and in
self-play, with no ``train``/``eval`` switch to forget and no stale running
averages; (ii) every sample is normalised on its own, so a search over a batch
gives exactly what each element searched alone gives, whatever else (finished
games, padding) shares the batch; (iii) its whole state is parameters, so
``nnx.split`` yields a plain pytree that ``jax.jit``/``jax.vmap``/``jax.grad`` and
optax handle with no mutable collections. BatchNorm is offered for fidelity to
AlphaZero; its :func:`apply` always uses the running averages (eval mode), and
training it means calling the model with ``train=True`` so that its batch
statistics are updated (e.g. inside ``nnx.value_and_grad``).

Functional use. A search needs a pure function of explicit parameters, so that the
network runs inline inside the search's ``jax.jit``. :func:`split` turns a model
into ``(graphdef, state)`` with ``nnx.split``, and :func:`apply` rebuilds it with
``nnx.merge`` and calls it: ``apply(graphdef, state, obs) -> (logits, value)``.
``functools.partial(apply, graphdef)`` is then an ``apply_fn(params, obs)`` for
:mod:`jaxpuct.envs.adapter` with ``params = state``. (See the Flax NNX guide "NNX
and JAX transformations": split/merge is the documented bridge to plain JAX.)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Literal

import jax
import jax.numpy as jnp
from flax import nnx

Norm = Literal["layer", "batch"]
_NORMS = ("layer", "batch")


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_norm(norm: str) -> None:
    if norm not in _NORMS:
        raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")


class _Norm(nnx.Module):
    """LayerNorm over the last (feature) axis, or BatchNorm; ``[..., F] -> [..., F]``."""

    def __init__(self, num_features: int, norm: Norm, *, rngs: nnx.Rngs):
        self.is_batch = norm == "batch"
        if self.is_batch:
            # Momentum 0.9 rather than Flax's 0.99: the running averages follow a
            # network that changes between self-play iterations within fewer steps.
            self.layer = nnx.BatchNorm(num_features, momentum=0.9, rngs=rngs)
        else:
            self.layer = nnx.LayerNorm(num_features, rngs=rngs)

    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        if self.is_batch:
            # is_batch: the layer is the BatchNorm, which takes this keyword.
            return self.layer(x, use_running_average=not train)  # pyright: ignore[reportCallIssue]
        return self.layer(x)


class ResidualBlock(nnx.Module):
    """``relu(x + norm(conv(relu(norm(conv(x))))))``; ``[B, H, W, C] -> [B, H, W, C]``."""

    def __init__(self, channels: int, norm: Norm, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(channels, channels, (3, 3), use_bias=False, rngs=rngs)
        self.norm1 = _Norm(channels, norm, rngs=rngs)
        self.conv2 = nnx.Conv(channels, channels, (3, 3), use_bias=False, rngs=rngs)
        self.norm2 = _Norm(channels, norm, rngs=rngs)

    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        y = jax.nn.relu(self.norm1(self.conv1(x), train))
        y = self.norm2(self.conv2(y), train)
        return jax.nn.relu(x + y)


class ResNetPolicyValue(nnx.Module):
    """AlphaZero residual policy-value network.

    Args:
      num_actions: ``A``, the number of policy logits.
      obs_shape: ``(H, W, C)``, the shape of one observation (channels last).
      num_blocks: residual blocks in the tower (AlphaZero: 19 or 39; 0 allowed).
      channels: filters per convolution (AlphaZero: 256).
      value_hidden: width of the value head's hidden dense layer (AlphaZero: 256).
      policy_channels: filters of the policy head's 1x1 convolution (AlphaZero: 2).
      value_channels: filters of the value head's 1x1 convolution (AlphaZero: 1).
      norm: ``"layer"`` (default) or ``"batch"``; see the module docstring.
      rngs: ``nnx.Rngs`` for the initialisation.

    Raises:
      ValueError: for a non-positive size, an ``obs_shape`` that is not three
        positive ints, or an unknown ``norm``.

    Call: ``model(obs [B, H, W, C], train=False) -> (logits [B, A] float32,
    value [B] float32 in [-1, 1])``. Boolean or integer observations are cast to
    float32.
    """

    def __init__(
        self,
        num_actions: int,
        obs_shape: Sequence[int],
        *,
        num_blocks: int = 6,
        channels: int = 64,
        value_hidden: int = 64,
        policy_channels: int = 2,
        value_channels: int = 1,
        norm: Norm = "layer",
        rngs: nnx.Rngs,
    ):
        obs_shape = tuple(obs_shape)
        if len(obs_shape) != 3:
            raise ValueError(f"obs_shape must be (H, W, C), got {obs_shape!r}")
        for axis, size in zip("HWC", obs_shape, strict=True):
            _check_positive(f"obs_shape {axis}", size)
        _check_positive("num_actions", num_actions)
        if not isinstance(num_blocks, int) or num_blocks < 0:
            raise ValueError(f"num_blocks must be an int >= 0, got {num_blocks!r}")
        for name, value in (("channels", channels), ("value_hidden", value_hidden),
                            ("policy_channels", policy_channels),
                            ("value_channels", value_channels)):
            _check_positive(name, value)
        _check_norm(norm)

        self.num_actions = int(num_actions)
        self.obs_shape = obs_shape = tuple(int(d) for d in obs_shape)
        height, width, in_channels = obs_shape
        self.stem_conv = nnx.Conv(in_channels, channels, (3, 3), use_bias=False, rngs=rngs)
        self.stem_norm = _Norm(channels, norm, rngs=rngs)
        self.blocks = nnx.List([ResidualBlock(channels, norm, rngs=rngs)
                                for _ in range(num_blocks)])
        self.policy_conv = nnx.Conv(channels, policy_channels, (1, 1), use_bias=False,
                                    rngs=rngs)
        self.policy_norm = _Norm(height * width * policy_channels, norm, rngs=rngs)
        self.policy_out = nnx.Linear(height * width * policy_channels, num_actions, rngs=rngs)
        self.value_conv = nnx.Conv(channels, value_channels, (1, 1), use_bias=False,
                                   rngs=rngs)
        self.value_norm = _Norm(height * width * value_channels, norm, rngs=rngs)
        self.value_hidden = nnx.Linear(height * width * value_channels, value_hidden, rngs=rngs)
        self.value_out = nnx.Linear(value_hidden, 1, rngs=rngs)

    def __call__(self, obs: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        if obs.ndim != 4 or tuple(obs.shape[1:]) != self.obs_shape:
            raise ValueError(
                f"expected observations [B, {', '.join(map(str, self.obs_shape))}], "
                f"got shape {tuple(obs.shape)}")
        batch = obs.shape[0]
        x = jax.nn.relu(self.stem_norm(self.stem_conv(obs.astype(jnp.float32)), train))
        for block in self.blocks:
            x = block(x, train)
        p = jax.nn.relu(self.policy_norm(self.policy_conv(x).reshape(batch, -1), train))
        logits = self.policy_out(p)
        v = jax.nn.relu(self.value_norm(self.value_conv(x).reshape(batch, -1), train))
        v = jax.nn.relu(self.value_hidden(v))
        value = jnp.tanh(self.value_out(v)[:, 0])
        return logits, value


class MLPPolicyValue(nnx.Module):
    """A small policy-value MLP for tiny games (e.g. tic-tac-toe).

    A shared trunk of dense + LayerNorm + ReLU layers, then a dense policy head and
    a dense ``tanh`` value head.

    Args:
      num_actions: ``A``, the number of policy logits.
      obs_shape: the shape of one observation, an int ``F`` or a tuple whose
        product is ``F`` (observations are flattened to ``[B, F]``).
      hidden: widths of the trunk's layers (at least one).
      rngs: ``nnx.Rngs`` for the initialisation.

    Raises:
      ValueError: for a non-positive size or an empty ``hidden``.

    Call: ``model(obs [B, F] or [B, *obs_shape], train=False) -> (logits [B, A],
    value [B] in [-1, 1])``; ``train`` is accepted for a uniform interface and
    ignored.
    """

    def __init__(
        self,
        num_actions: int,
        obs_shape: int | Sequence[int],
        *,
        hidden: Sequence[int] = (64, 64),
        rngs: nnx.Rngs,
    ):
        # int first: pyright narrows by it (numbers.Integral is only registered for int).
        dims = ((int(obs_shape),) if isinstance(obs_shape, (int, numbers.Integral))
                else tuple(obs_shape))
        if not dims:
            raise ValueError("obs_shape must not be empty")
        for size in dims:
            _check_positive("obs_shape entries", size)
        _check_positive("num_actions", num_actions)
        hidden = tuple(hidden)
        if not hidden:
            raise ValueError("hidden must list at least one layer width")
        for width in hidden:
            _check_positive("hidden widths", width)

        self.num_actions = int(num_actions)
        self.obs_shape = dims = tuple(int(d) for d in dims)
        self.obs_size = math.prod(dims)
        widths = (self.obs_size,) + hidden
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs)
                                for a, b in zip(widths[:-1], hidden, strict=True)])
        self.norms = nnx.List([nnx.LayerNorm(b, rngs=rngs) for b in hidden])
        self.policy_out = nnx.Linear(hidden[-1], num_actions, rngs=rngs)
        self.value_out = nnx.Linear(hidden[-1], 1, rngs=rngs)

    def __call__(self, obs: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        del train
        if obs.ndim < 2 or math.prod(obs.shape[1:]) != self.obs_size:
            raise ValueError(
                f"expected observations [B, {self.obs_size}] (or [B, *{self.obs_shape}]), "
                f"got shape {tuple(obs.shape)}")
        x = obs.reshape(obs.shape[0], self.obs_size).astype(jnp.float32)
        for layer, norm in zip(self.layers, self.norms, strict=True):
            x = jax.nn.relu(norm(layer(x)))
        logits = self.policy_out(x)
        value = jnp.tanh(self.value_out(x)[:, 0])
        return logits, value


def split(model: nnx.Module) -> tuple[nnx.GraphDef, nnx.State]:
    """Splits a model into its static structure and its state (``nnx.split``).

    Returns:
      ``(graphdef, state)``: ``graphdef`` is hashable and has no array leaves (it
      may be closed over or passed through ``jax.jit``); ``state`` is a pytree of
      every variable (parameters and, for BatchNorm, batch statistics) to pass as
      the search's ``params``.
    """
    return nnx.split(model)


def apply(graphdef: nnx.GraphDef, state: nnx.State,
          obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Calls a split model functionally, in inference mode.

    Args:
      graphdef: from :func:`split`.
      state: from :func:`split` (or trained parameters of the same structure).
      obs: ``[B, ...]`` observations the model accepts.

    Returns:
      ``(logits [B, A], value [B])``. Pure: ``state`` is not modified (BatchNorm
      uses its running averages), so this can run inside ``jax.jit``/``jax.vmap``.
    """
    model = nnx.merge(graphdef, state)
    return model(obs, train=False)
