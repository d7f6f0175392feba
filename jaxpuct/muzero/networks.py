"""MuZero's three learned functions in Flax NNX: representation, dynamics, prediction.

Schrittwieser et al. 2020 ("Mastering Atari, Go, chess and shogi by planning with
a learned model"), section "MuZero Algorithm" and appendix F:

* representation ``h(obs) -> s0``;
* dynamics ``g(s, a) -> (r, s')``: the reward of taking ``a`` and the next latent;
* prediction ``f(s) -> (p, v)``: policy logits and value at a latent.

Two families, chosen by :class:`NetworkConfig`:

* ``"mlp"``: latents ``[B, L]``; the action enters the dynamics as a one-hot
  vector ``[B, A]`` concatenated to the latent; each function is a trunk of
  dense + LayerNorm + ReLU layers. With a continuous action space
  (``jaxpuct.sampled.GaussianActions(D)``, Sampled MuZero's, Hubert et al. 2021)
  the action vector ``[B, D]`` is concatenated instead and the policy head gives
  the Gaussian's parameters ``[B, 2D]`` (mean, log sigma) that
  :func:`jaxpuct.sampled_policy` samples from; with ``action_scale = c`` the mean
  is ``c tanh(.)`` and the dynamics sees ``clip(a, -c, c) / c``, the action an
  environment with a box ``[-c, c]`` applies.
* ``"resnet"``: latents ``[B, H, W, C]`` over the observation's board
  ``[B, H, W, C_obs]`` (channels last); the AlphaZero residual blocks of
  :mod:`jaxpuct.alphazero.networks` (shared, not copied); the action enters as
  *planes* beside the latent, by ``NetworkConfig.action_encoding``:

  - ``"cell"``: the ``A`` actions laid over ``P = ceil(A / (H W))`` planes of
    ``H x W`` cells, action ``a`` a one at cell ``a mod HW`` of plane ``a // HW``
    (a board move is a one on its own square, as the paper encodes board-game
    actions; Go's pass lands on a second plane);
  - ``"column"``: one plane with ones on the whole column ``a`` (``A = W``:
    connect four's drops). A convolution finds the landing square locally (the
    lowest empty cell of the marked column); with ``"cell"`` the one sits in the
    board's first row and must travel down the column through the tower's
    receptive field first;
  - ``"constant"``: ``A`` planes, plane ``a`` all ones (actions that are not
    places on the board, such as 2048's slides).

Latent scaling (paper, appendix G): every latent the representation and the
dynamics produce is rescaled to ``[0, 1]`` per sample by its own minimum and
maximum over all its features, ``(s - min) / max(max - min, latent_epsilon)``,
"to the same range as the action input". (muzero-general scales per channel,
LightZero over the whole latent; whole-latent scaling treats both families the
same way.)

Heads: with ``value_support = n`` (``reward_support`` likewise) the head gives
``2n + 1`` logits over the atoms ``-n..n`` of :mod:`.value_transform`; with
``None`` it gives a scalar squashed into ``[-1, 1]`` by ``tanh``, for games whose
values and rewards are bounded there (board games; the paper uses scalar heads
with MSE there). :func:`head_scalar` reads either as a scalar.

LayerNorm everywhere (no BatchNorm): no running statistics, so every sample is
computed alone and a search over a batch gives what each element searched alone
gives (see :mod:`jaxpuct.alphazero.networks` for the longer argument).

Functional use: :func:`jaxpuct.alphazero.networks.split` gives ``(graphdef,
state)``; :class:`jaxpuct.muzero.model.MuZeroModel` merges them inside the
search's ``jit``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Literal

import jax
import jax.numpy as jnp
from flax import nnx

from jaxpuct.alphazero.networks import ResidualBlock
from jaxpuct.muzero.value_transform import Support, logits_to_scalar
from jaxpuct.sampled import DiscreteActions, GaussianActions

__all__ = ["ACTION_ENCODINGS", "ConsistencyHeads", "MuZeroNetwork", "NetworkConfig", "Trunk",
           "action_plane_count", "action_planes", "head_scalar", "init_network", "init_split",
           "network_input", "scale_latent"]

ActionEncoding = Literal["cell", "column", "constant"]
ACTION_ENCODINGS = ("cell", "column", "constant")
Kind = Literal["mlp", "resnet"]


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The shape of a MuZero network (static; hashable).

    Attributes:
      kind: ``"mlp"`` or ``"resnet"`` (module docstring).
      hidden: widths of the dense layers of each function's trunk (MLP), or of the
        hidden layer of the ResNet's value and reward heads (first entry).
      latent_size: ``L``, features of an MLP latent.
      channels: ``C``, channels of a ResNet latent ``[H, W, C]``.
      num_blocks: residual blocks in each ResNet function (>= 0).
      value_support: ``n`` of the value head's ``2n + 1`` atoms, or ``None`` for a
        ``tanh`` scalar head.
      reward_support: ``n`` of the reward head, or ``None`` for a ``tanh`` scalar.
      latent_epsilon: smallest denominator of the latent's min-max scaling.
      action_scale: ``c`` of a continuous space's box ``[-c, c]`` (module
        docstring), or ``None`` (unbounded); unused by discrete actions.
      projection: ``P``, width of the self-supervised consistency heads
        (EfficientZero's projector and predictor, :meth:`MuZeroNetwork.project`);
        0: no such heads (the default; the parameters are MuZero's alone).
      action_encoding: how a ResNet's dynamics sees the action: ``"cell"``,
        ``"column"`` or ``"constant"`` planes (:func:`action_planes`, module
        docstring); unused by ``"mlp"``.
    """

    kind: Kind = "mlp"
    hidden: tuple[int, ...] = (64,)
    latent_size: int = 32
    channels: int = 32
    num_blocks: int = 2
    value_support: int | None = None
    reward_support: int | None = None
    latent_epsilon: float = 1e-5
    action_scale: float | None = None
    projection: int = 0
    action_encoding: ActionEncoding = "cell"

    def __post_init__(self):
        if self.kind not in ("mlp", "resnet"):
            raise ValueError(f"NetworkConfig.kind must be 'mlp' or 'resnet', got {self.kind!r}.")
        if not self.hidden or any(not isinstance(w, int) or w < 1 for w in self.hidden):
            raise ValueError(f"NetworkConfig.hidden must be positive ints, got {self.hidden!r}.")
        for name in ("latent_size", "channels"):
            if getattr(self, name) < 1:
                raise ValueError(f"NetworkConfig.{name} must be >= 1, got "
                                 f"{getattr(self, name)!r}.")
        if self.num_blocks < 0:
            raise ValueError(f"NetworkConfig.num_blocks must be >= 0, got {self.num_blocks!r}.")
        for name in ("value_support", "reward_support"):
            size = getattr(self, name)
            if size is not None and (not isinstance(size, int) or size < 1):
                raise ValueError(f"NetworkConfig.{name} must be an int >= 1 or None, got "
                                 f"{size!r}.")
        if not self.latent_epsilon > 0:
            raise ValueError(f"NetworkConfig.latent_epsilon must be > 0, got "
                             f"{self.latent_epsilon!r}.")
        if self.action_scale is not None and not self.action_scale > 0:
            raise ValueError(f"NetworkConfig.action_scale must be > 0 or None, got "
                             f"{self.action_scale!r}.")
        if self.action_encoding not in ACTION_ENCODINGS:
            raise ValueError(f"NetworkConfig.action_encoding must be one of "
                             f"{ACTION_ENCODINGS}, got {self.action_encoding!r}.")
        if not isinstance(self.projection, int) or self.projection < 0:
            raise ValueError(f"NetworkConfig.projection must be an int >= 0, got "
                             f"{self.projection!r}.")

    @property
    def value(self) -> Support | None:
        """The value head's support (``None``: scalar head)."""
        return None if self.value_support is None else Support(self.value_support)

    @property
    def reward(self) -> Support | None:
        """The reward head's support (``None``: scalar head)."""
        return None if self.reward_support is None else Support(self.reward_support)


def head_width(support: Support | None) -> int:
    """Outputs of a head: ``2n + 1`` atoms, or 1 for a scalar."""
    return 1 if support is None else support.num_atoms


def head_output(raw: jax.Array, support: Support | None) -> jax.Array:
    """``raw [B, W]`` -> logits ``[B, 2n + 1]`` or a ``tanh`` scalar ``[B]``."""
    return jnp.tanh(raw[:, 0]) if support is None else raw


def head_scalar(out: jax.Array, support: Support | None) -> jax.Array:
    """A head's output as a scalar ``[B]``: the categorical expectation through
    ``h^-1`` (:func:`.value_transform.logits_to_scalar`), or the scalar itself."""
    return out if support is None else logits_to_scalar(out, support)


def _extreme(flat: jax.Array, largest: bool) -> jax.Array:
    """``[B, 1]``: the max (or min) of each row of ``flat [B, F]``, differentiated
    as ``jnp.max`` is (the gradient split among the elements equal to it), except
    where none is: XLA:CPU at optimisation level 0 recomputed the operand of the
    connect-four ResNet with other rounding, no element equalled the extreme, and
    ``jnp.max``'s rule gave 0 / 0 = NaN. There the extreme gets no gradient."""

    @jax.custom_jvp
    def extreme(x):
        return (jnp.max if largest else jnp.min)(x, axis=1, keepdims=True)

    @extreme.defjvp
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        value = extreme(x)
        at = (x == value).astype(dx.dtype)
        count = jnp.maximum(jnp.sum(at, axis=1, keepdims=True), 1.0)
        return value, jnp.sum(dx * at, axis=1, keepdims=True) / count

    return extreme(flat)


def scale_latent(latent: jax.Array, epsilon: float) -> jax.Array:
    """Min-max scaling to ``[0, 1]`` of each sample over all its features
    (appendix G): ``[B, ...] -> [B, ...]``."""
    flat = latent.reshape(latent.shape[0], -1)
    low, high = _extreme(flat, largest=False), _extreme(flat, largest=True)
    scaled = (flat - low) / jnp.maximum(high - low, epsilon)
    return scaled.reshape(latent.shape)


def action_plane_count(num_actions: int, board: tuple[int, int],
                       encoding: ActionEncoding = "cell") -> int:
    """``P``, the planes :func:`action_planes` gives; ``ValueError`` where
    ``encoding`` does not fit ``num_actions`` and ``board``."""
    height, width = board
    if encoding == "column":
        if num_actions != width:
            raise ValueError(f"action_encoding 'column' needs one action per column: "
                             f"num_actions {num_actions} against a board of width {width}.")
        return 1
    if encoding == "constant":
        return num_actions
    return math.ceil(num_actions / (height * width))


def action_planes(action: jax.Array, num_actions: int, board: tuple[int, int],
                  encoding: ActionEncoding = "cell") -> jax.Array:
    """Action planes ``[B, H, W, P]`` of ``action [B]`` (``P``:
    :func:`action_plane_count`): ``"cell"`` a one on the action's cell,
    ``"column"`` ones on its column, ``"constant"`` a plane of ones per action
    (module docstring)."""
    height, width = board
    planes = action_plane_count(num_actions, board, encoding)
    if encoding == "column":
        column = jax.nn.one_hot(action, width, dtype=jnp.float32)  # [B, W]
        return jnp.broadcast_to(column[:, None, :, None], (column.shape[0], height, width, 1))
    if encoding == "constant":
        one_hot = jax.nn.one_hot(action, num_actions, dtype=jnp.float32)  # [B, A]
        return jnp.broadcast_to(one_hot[:, None, None, :],
                                (one_hot.shape[0], height, width, num_actions))
    cells = height * width
    flat = jax.nn.one_hot(action, planes * cells, dtype=jnp.float32)  # [B, P * H * W]
    return jnp.moveaxis(flat.reshape(-1, planes, height, width), 1, -1)


def network_input(obs: jax.Array, obs_shape: tuple[int, ...], kind: Kind,
                  name: str = "observations") -> jax.Array:
    """``obs [B, ...]`` of ``obs_shape``'s size as float32, read in row-major order:
    ``[B, F]`` flattened for ``"mlp"``, ``[B, *obs_shape]`` for ``"resnet"`` (so
    2048's flat board reaches a ResNet as planes); ``ValueError`` naming ``name``
    for another size."""
    if math.prod(obs.shape[1:]) != math.prod(obs_shape):
        raise ValueError(f"expected {name} [B, {', '.join(map(str, obs_shape))}], got shape "
                         f"{tuple(obs.shape)}.")
    x = obs.astype(jnp.float32)
    return x.reshape(x.shape[0], -1) if kind == "mlp" else x.reshape(x.shape[0], *obs_shape)


class Trunk(nnx.Module):
    """Dense + LayerNorm + ReLU layers: ``[B, F] -> [B, hidden[-1]]``."""

    def __init__(self, in_features: int, hidden: Sequence[int], *, rngs: nnx.Rngs):
        widths = (in_features, *hidden)
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs)
                                for a, b in zip(widths[:-1], widths[1:], strict=True)])
        self.norms = nnx.List([nnx.LayerNorm(b, rngs=rngs) for b in hidden])

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer, norm in zip(self.layers, self.norms, strict=True):
            x = jax.nn.relu(norm(layer(x)))
        return x


class ConsistencyHeads(nnx.Module):
    """EfficientZero's projector and predictor (Ye et al. 2021, "Mastering Atari
    Games with Limited Data", the self-supervised consistency of SimSiam, Chen and
    He 2021), with LayerNorm where they use BatchNorm (module docstring):

    * projector: ``[B, F] -> [B, P]``, dense + LayerNorm + ReLU, then dense +
      LayerNorm (the flattened latent in, ``F`` its features);
    * predictor: ``[B, P] -> [B, P]``, dense to ``P // 2`` + LayerNorm + ReLU,
      then dense (applied to the dynamics' branch only).
    """

    def __init__(self, in_features: int, width: int, *, rngs: nnx.Rngs):
        self.proj_hidden = Trunk(in_features, (width,), rngs=rngs)
        self.proj_out = nnx.Linear(width, width, rngs=rngs)
        self.proj_norm = nnx.LayerNorm(width, rngs=rngs)
        self.pred_hidden = Trunk(width, (max(width // 2, 1),), rngs=rngs)
        self.pred_out = nnx.Linear(max(width // 2, 1), width, rngs=rngs)

    def project(self, latent: jax.Array) -> jax.Array:
        flat = latent.reshape(latent.shape[0], -1)
        return self.proj_norm(self.proj_out(self.proj_hidden(flat)))

    def predict(self, projection: jax.Array) -> jax.Array:
        return self.pred_out(self.pred_hidden(projection))


class _ConvHead(nnx.Module):
    """1x1 conv, LayerNorm over the flattened board, ReLU, then (with ``hidden``) a
    dense ReLU layer, then dense to ``out``: ``[B, H, W, C] -> [B, out]``."""

    def __init__(self, board_cells: int, channels: int, head_channels: int, out: int,
                 hidden: int | None, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(channels, head_channels, (1, 1), use_bias=False, rngs=rngs)
        features = board_cells * head_channels
        self.norm = nnx.LayerNorm(features, rngs=rngs)
        self.hidden = None if hidden is None else nnx.Linear(features, hidden, rngs=rngs)
        self.out = nnx.Linear(features if hidden is None else hidden, out, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.nn.relu(self.norm(self.conv(x).reshape(x.shape[0], -1)))
        if self.hidden is not None:
            y = jax.nn.relu(self.hidden(y))
        return self.out(y)


class _Tower(nnx.Module):
    """3x3 conv (``in -> C``), LayerNorm, ReLU, then residual blocks: ``[B, H, W, in]
    -> [B, H, W, C]``."""

    def __init__(self, in_channels: int, channels: int, num_blocks: int, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(in_channels, channels, (3, 3), use_bias=False, rngs=rngs)
        self.norm = nnx.LayerNorm(channels, rngs=rngs)
        self.blocks = nnx.List([ResidualBlock(channels, "layer", rngs=rngs)
                                for _ in range(num_blocks)])

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.norm(self.conv(x)))
        for block in self.blocks:
            x = block(x)
        return x


class MuZeroNetwork(nnx.Module):
    """Representation, dynamics and prediction of one MuZero model.

    Args:
      config: the :class:`NetworkConfig`.
      num_actions: ``A``, or a ``GaussianActions(D)`` for continuous actions
        (``"mlp"`` only; module docstring).
      obs_shape: one observation's shape: any shape for ``"mlp"`` (flattened),
        ``(H, W, C)`` for ``"resnet"``.
      rngs: ``nnx.Rngs`` for the initialisation.

    Methods (``B`` any batch; boolean or integer observations are cast to float32):

    * ``represent(obs [B, *obs_shape]) -> latent`` (``[B, L]`` or ``[B, H, W, C]``,
      in ``[0, 1]``);
    * ``dynamics(latent, action [B] int) -> (reward, next latent)``
      (``action [B, D]`` float when continuous);
    * ``predict(latent) -> (policy logits [B, A], value)`` (the Gaussian's
      parameters ``[B, 2D]`` when continuous);
    * ``project(latent, predictor=False) -> [B, P]``: the consistency heads
      (``NetworkConfig.projection > 0`` only);

    ``action_space`` is the ``jaxpuct.sampled`` space the policy head is read in
    (``DiscreteActions(A)`` or the ``GaussianActions`` given).

    where ``reward`` and ``value`` are logits ``[B, 2n + 1]`` for a categorical
    head or scalars ``[B]`` in ``[-1, 1]`` (:func:`head_scalar` reads both).
    """

    def __init__(self, config: NetworkConfig, num_actions: int | GaussianActions,
                 obs_shape: Sequence[int] | int, *, rngs: nnx.Rngs):
        obs_shape = (obs_shape,) if isinstance(obs_shape, int) else tuple(obs_shape)
        if isinstance(num_actions, GaussianActions):
            if config.kind != "mlp":
                raise ValueError(f"continuous actions need NetworkConfig.kind = 'mlp', got "
                                 f"{config.kind!r}.")
            self.action_space: DiscreteActions | GaussianActions = num_actions
            self.num_actions = 0
            action_width, policy_width = num_actions.action_dim, num_actions.params_width
        else:
            if num_actions < 1:
                raise ValueError(f"num_actions must be >= 1, got {num_actions!r}.")
            self.action_space = DiscreteActions(int(num_actions))
            self.num_actions = int(num_actions)
            action_width = policy_width = self.num_actions
        self.config = config
        self.obs_shape = obs_shape
        value_width, reward_width = head_width(config.value), head_width(config.reward)
        if config.kind == "mlp":
            hidden = config.hidden
            self.repr_trunk = Trunk(math.prod(obs_shape), hidden, rngs=rngs)
            self.repr_out = nnx.Linear(hidden[-1], config.latent_size, rngs=rngs)
            self.dyn_trunk = Trunk(config.latent_size + action_width, hidden, rngs=rngs)
            self.dyn_out = nnx.Linear(hidden[-1], config.latent_size, rngs=rngs)
            self.reward_out = nnx.Linear(hidden[-1], reward_width, rngs=rngs)
            self.pred_trunk = Trunk(config.latent_size, hidden, rngs=rngs)
            self.policy_out = nnx.Linear(hidden[-1], policy_width, rngs=rngs)
            self.value_out = nnx.Linear(hidden[-1], value_width, rngs=rngs)
            self.consistency = self._consistency_heads(config.latent_size, rngs)
            return
        if len(obs_shape) != 3:
            raise ValueError(f"a 'resnet' network needs obs_shape (H, W, C), got {obs_shape!r}.")
        height, width, in_channels = obs_shape
        cells, channels = height * width, config.channels
        self.board = (height, width)
        self.action_plane_count = action_plane_count(self.num_actions, self.board,
                                                     config.action_encoding)
        self.repr_tower = _Tower(in_channels, channels, config.num_blocks, rngs=rngs)
        self.dyn_tower = _Tower(channels + self.action_plane_count, channels,
                                config.num_blocks, rngs=rngs)
        self.reward_head = _ConvHead(cells, channels, 1, reward_width, config.hidden[0],
                                     rngs=rngs)
        self.pred_tower = _Tower(channels, channels, config.num_blocks, rngs=rngs)
        self.policy_head = _ConvHead(cells, channels, 2, self.num_actions, None, rngs=rngs)
        self.value_head = _ConvHead(cells, channels, 1, value_width, config.hidden[0],
                                    rngs=rngs)
        self.consistency = self._consistency_heads(cells * channels, rngs)

    def _consistency_heads(self, latent_features: int, rngs: nnx.Rngs
                           ) -> ConsistencyHeads | None:
        width = self.config.projection
        return ConsistencyHeads(latent_features, width, rngs=rngs) if width else None

    def project(self, latent: jax.Array, predictor: bool = False) -> jax.Array:
        """The consistency heads on ``latent [B, ...]``: the projection ``[B, P]``
        (the target branch of :func:`.training.consistency_loss`), and with
        ``predictor`` the predictor on it (the dynamics' branch). Needs
        ``NetworkConfig.projection > 0``."""
        if self.consistency is None:
            raise ValueError("MuZeroNetwork.project needs consistency heads: "
                             "NetworkConfig.projection must be > 0, got 0.")
        projection = self.consistency.project(latent)
        return self.consistency.predict(projection) if predictor else projection

    def represent(self, obs: jax.Array) -> jax.Array:
        x = network_input(obs, self.obs_shape, self.config.kind, "observations")
        latent = (self.repr_out(self.repr_trunk(x)) if self.config.kind == "mlp"
                  else self.repr_tower(x))
        return scale_latent(latent, self.config.latent_epsilon)

    @property
    def continuous(self) -> bool:
        return isinstance(self.action_space, GaussianActions)

    def action_input(self, action: jax.Array, dtype) -> jax.Array:
        """What the MLP dynamics sees of ``action``: ``[B, A]`` one-hot, or the
        vector ``[B, D]`` (clipped and scaled into ``[-1, 1]`` by
        ``action_scale``)."""
        if not self.continuous:
            return jax.nn.one_hot(action, self.num_actions, dtype=dtype)
        scale = self.config.action_scale
        x = action.astype(dtype)
        return x if scale is None else jnp.clip(x, -scale, scale) / scale

    def dynamics(self, latent: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.config.kind == "mlp":
            y = self.dyn_trunk(jnp.concatenate([latent, self.action_input(action, latent.dtype)],
                                               axis=-1))
            next_latent, reward = self.dyn_out(y), self.reward_out(y)
        else:
            planes = action_planes(action, self.num_actions, self.board,
                                   self.config.action_encoding)
            next_latent = self.dyn_tower(jnp.concatenate([latent, planes], axis=-1))
            reward = self.reward_head(next_latent)
        return (head_output(reward, self.config.reward),
                scale_latent(next_latent, self.config.latent_epsilon))

    def predict(self, latent: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.config.kind == "mlp":
            y = self.pred_trunk(latent)
            logits, value = self.policy_out(y), self.value_out(y)
            scale = self.config.action_scale
            if self.continuous and scale is not None:
                dim = self.action_space.params_width // 2
                logits = jnp.concatenate([scale * jnp.tanh(logits[:, :dim]), logits[:, dim:]],
                                         axis=-1)
        else:
            y = self.pred_tower(latent)
            logits, value = self.policy_head(y), self.value_head(y)
        return logits, head_output(value, self.config.value)


def init_network(config: NetworkConfig, num_actions: int | GaussianActions,
                 obs_shape: Sequence[int] | int, key: int | jax.Array = 0
                 ) -> tuple[nnx.GraphDef, nnx.State]:
    """A new network, split: ``(graphdef, state)``.

    Args:
      num_actions: ``A`` or a ``GaussianActions`` (:class:`MuZeroNetwork`).
      key: an int seed or a PRNG key (an ``impl="rbg"`` key compiles its
        initialisers much faster on CPU than the default threefry).

    The initialisation runs as one jitted program: built eagerly, every
    initialiser of a Flax module is dispatched (and compiled) on its own. The
    program is compiled once per ``(config, num_actions, obs_shape)`` and key
    type, whatever the key.
    """
    shape = tuple(obs_shape) if isinstance(obs_shape, Sequence) else obs_shape
    return init_split(MuZeroNetwork, (config, num_actions, shape), key)


def init_split(module: Callable[..., nnx.Module], args: tuple, key: int | jax.Array
               ) -> tuple[nnx.GraphDef, nnx.State]:
    """``(graphdef, state)`` of ``module(*args, rngs=nnx.Rngs(key))``, the state from
    one jitted program compiled once per ``(module, args)`` (hashable: frozen
    configs, ints, tuples) and key type, whatever the key's value."""
    if isinstance(key, int):
        key = jax.random.key(key)  # what nnx.Rngs does with an int seed
    return _graphdef(module, args, jax.ShapeDtypeStruct(key.shape, key.dtype)), _init_state(
        module, args, key)


@functools.cache
def _graphdef(module: Callable[..., nnx.Module], args: tuple,
              key: jax.ShapeDtypeStruct) -> nnx.GraphDef:
    # The structure depends on the key's type, not its value: traced once per
    # (module, args, key type), as _init_state is compiled.
    return nnx.split(nnx.eval_shape(lambda k: module(*args, rngs=nnx.Rngs(k)), key))[0]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _init_state(module: Callable[..., nnx.Module], args: tuple, key: jax.Array) -> nnx.State:
    return nnx.split(module(*args, rngs=nnx.Rngs(key)))[1]
