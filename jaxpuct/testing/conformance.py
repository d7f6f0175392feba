"""Conformance checks for a user's ``recurrent_fn`` and root, before searching with it.

In the spirit of pgx's API test (``pgx.api_test``, which steps an environment at
random and checks the shapes, dtypes and conventions of every state), and for
the mctx-compatible interface of :mod:`jaxpuct.types`:
:func:`check_recurrent_fn` plays a few random legal moves from ``root`` and
checks, at every step,

* **fields, shapes and dtypes**: ``B >= 1``; ``reward``, ``discount``, ``value``
  ``[B]`` float; ``prior_logits`` ``[B, A]`` float; ``legal_action_mask``
  ``[B, A]`` bool; ``terminal`` ``[B]`` bool; ``state_hash`` ``[B, 2]`` uint32
  (present in every output iff present at the root). "Float" is any floating
  dtype, bfloat16 and float16 included: the search accepts low-precision network
  outputs and computes in float32, as the policies do;
* **the state hash** (``state_hash``, or ``hash_fn(embedding)`` for
  ``GraphConfig.hash_fn``) changes from a state to its child: a hash that never
  changes over the moves played (a constant, e.g. all zeros) is an error, since
  graph search would merge every state into one node; a single move that keeps
  the hash is a warning (graph search reads it as a move back to the same state);
* **the embedding** keeps its pytree structure and every leaf its shape and dtype
  (the search stores embeddings in fixed arrays: a changed dtype is cast or fails);
* **jit**: ``jax.jit(recurrent_fn)`` runs (no Python branch on a traced value)
  and gives what the eager call gives;
* **finite outputs** for states reached by legal moves: reward, discount and value
  finite; prior logits never NaN or ``+inf``, ``-inf`` only on illegal actions;
* **batch independence**: element ``b`` of a batched call equals a call on
  element ``b`` alone (batch of 1, same key), i.e. nothing leaks across the batch;
* **terminal conventions** (when ``terminal`` is given): a non-terminal state has
  a legal action (an error); a terminal state with a non-zero value or with legal
  actions is reported as a warning, since the search (like mctx's convention)
  expects the outcome in the reward and a terminal value of 0.

The root is checked the same way (shapes, dtypes, prior logits consistent with its
legal mask).

**Sampled actions** (:mod:`jaxpuct.sampled`): with ``action_space=`` the moves
played are what a sampled search passes. ``DiscreteActions(A)``: ``[B]`` int32 ids,
as for full-width search, with ``A`` checked against the space.
``GaussianActions(D)``: ``[B, D]`` float32 vectors drawn from each state's own
Gaussian (as the search draws them), ``prior_logits`` ``[B, 2D]`` are the
Gaussian's parameters (mean, then ``log σ``) and must be finite (the search
would read a non-finite one as 0), and a ``legal_action_mask`` is reported as
ignored (every vector is an action; terminal states still end the game).
``FactoredActions((n_1, ..., n_F))``: ``prior_logits`` and ``legal_action_mask``
are ``[B, n_1 + ... + n_F]`` (factor values, factor 0 first), the moves played are
``[B]`` int32 joint ids (mixed radix, factor 0 most significant) whose every
factor value is legal, and a non-terminal state in which one factor has no legal
value (so no joint action is legal) is an error.

The first failed check raises :class:`ConformanceError`, whose
message names the field and says what to fix; non-fatal findings are returned in
:attr:`ConformanceReport.warnings` (and emitted with :func:`warnings.warn`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.sampled import ActionSpace, DiscreteActions, FactoredActions, GaussianActions
from jaxpuct.testing._common import RecurrentFn

__all__ = ["ConformanceError", "ConformanceReport", "ConformanceWarning",
           "check_recurrent_fn", "check_root"]


class ConformanceError(ValueError):
    """A ``recurrent_fn`` or root breaks the interface.

    Attributes:
      field: the output field or embedding leaf at fault (``"value"``,
        ``"embedding.board"``, ``"recurrent_fn"`` for the function itself).
      check: which check failed: ``"shape"``, ``"dtype"``, ``"missing"``,
        ``"structure"``, ``"jit"``, ``"finite"``, ``"batch_independence"``,
        ``"terminal"``, ``"legal_mask"``, ``"hash"``.
    """

    def __init__(self, field: str, check: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.check = check


class ConformanceWarning(UserWarning):
    """A finding that does not break the search but probably is a mistake."""


@dataclasses.dataclass(frozen=True)
class ConformanceReport:
    """What :func:`check_recurrent_fn` checked (it raised if anything failed).

    Attributes:
      batch_size: ``B``.
      num_actions: ``A``, the width of ``prior_logits`` (``2D`` with
        ``GaussianActions``, ``n_1 + ... + n_F`` with ``FactoredActions``).
      num_steps: steps played.
      has_legal_mask: the outputs carry ``legal_action_mask`` (read from the
        output's structure, without playing, when no step was played).
      has_terminal: the outputs carry ``terminal`` (likewise).
      has_state_hash: the root and outputs carry ``state_hash``.
      warnings: non-fatal findings, one sentence each.
      action_dim: ``D`` of the vectors played (``GaussianActions``), else ``None``.
    """

    batch_size: int
    num_actions: int
    num_steps: int
    has_legal_mask: bool
    has_terminal: bool
    has_state_hash: bool
    warnings: tuple[str, ...] = ()
    action_dim: int | None = None


_FLOAT_B = ("reward", "discount", "value")


def _fail(field: str, check: str, message: str) -> None:
    raise ConformanceError(field, check, message)


def _check_array(field: str, x: Any, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """``x`` as a host array after checking its shape and dtype kind."""
    if x is None:
        _fail(field, "missing", f"is None; expected an array of shape {shape}")
    x = np.asarray(x)
    if x.shape != shape:
        _fail(field, "shape", f"has shape {x.shape}, expected {shape} (B = {shape[0]}"
              + (f", A = {shape[1]}" if len(shape) > 1 and field != "state_hash" else "")
              + "); batch every output along its leading axis")
    # jnp.issubdtype: NumPy does not count bfloat16 (an ml_dtypes type) as floating.
    if kind == "float" and not jnp.issubdtype(x.dtype, jnp.floating):
        _fail(field, "dtype", f"has dtype {x.dtype}; expected a float dtype "
              f"(cast with .astype(jnp.float32))")
    if kind == "bool" and x.dtype != np.bool_:
        _fail(field, "dtype", f"has dtype {x.dtype}; expected bool (e.g. mask != 0)")
    if kind == "uint32" and x.dtype != np.uint32:
        _fail(field, "dtype", f"has dtype {x.dtype}; expected uint32 (two 32-bit words of "
              "a 64-bit hash, e.g. jaxpuct.envs.hashing.zobrist_hash)")
    return x


def _leaves(embedding: Any) -> tuple[list[tuple[str, Any]], Any]:
    flat, treedef = jax.tree_util.tree_flatten_with_path(embedding)
    return [("embedding" + jax.tree_util.keystr(path), leaf) for path, leaf in flat], treedef


def _embedding_spec(embedding: Any, batch: int) -> tuple[Any, list[tuple[str, tuple, Any]]]:
    leaves, treedef = _leaves(embedding)
    if not leaves:
        _fail("embedding", "structure", "has no array leaves; the search needs a batched "
              "state (any pytree of [B, ...] arrays)")
    spec = []
    for name, leaf in leaves:
        shape = tuple(np.shape(leaf))
        if not shape or shape[0] != batch:
            _fail(name, "shape", f"has shape {shape}; every embedding leaf must be [B, ...] "
                  f"with B = {batch}")
        spec.append((name, shape, np.asarray(leaf).dtype))
    return treedef, spec


def _check_embedding(embedding: Any, treedef: Any, spec: list) -> None:
    leaves, new_treedef = _leaves(embedding)
    if new_treedef != treedef:
        _fail("embedding", "structure", f"changed pytree structure: {treedef} became "
              f"{new_treedef}; return the new state in the same structure as the old")
    for (name, leaf), (_, shape, dtype) in zip(leaves, spec, strict=True):
        if tuple(np.shape(leaf)) != shape:
            _fail(name, "shape", f"changed shape from {shape} to {tuple(np.shape(leaf))}; "
                  "the search stores embeddings in fixed-shape arrays")
        if np.asarray(leaf).dtype != dtype:
            _fail(name, "dtype", f"changed dtype from {dtype} to {np.asarray(leaf).dtype}; "
                  "return every leaf with its input dtype (e.g. .astype(x.dtype))")


def _lowest(dtype: Any) -> float:
    """The lowest finite number of a float ``dtype`` (bfloat16 included)."""
    return float(jnp.finfo(dtype).min)


def _check_logits(field: str, logits: np.ndarray, legal: np.ndarray | None,
                  rows: np.ndarray) -> None:
    logits = logits[rows]
    if np.isnan(logits).any():
        _fail(field, "finite", "contains NaN; a prior must be a number for every action "
              "(use a large negative finite logit for illegal actions)")
    if np.isposinf(logits).any():
        _fail(field, "finite", "contains +inf")
    # The search reads -inf and finfo(dtype).min alike as "illegal" (numerics).
    if legal is not None and (logits[legal[rows]] <= _lowest(logits.dtype)).any():
        _fail(field, "legal_mask", "is -inf or finfo(dtype).min on a legal action: the "
              "search would treat it as illegal; mask only illegal actions, or fix "
              "legal_action_mask")


def _check_gaussian_params(field: str, params: np.ndarray, rows: np.ndarray) -> None:
    if not np.isfinite(params[rows]).all():
        _fail(field, "finite", "contains NaN or inf; with GaussianActions prior_logits are "
              "the Gaussian's mean and log std, which must be finite (the search reads a "
              "non-finite one as 0)")


def _check_action_space(action_space: Any) -> None:
    if action_space is not None and not isinstance(
            action_space, (DiscreteActions, FactoredActions, GaussianActions)):
        raise ValueError("action_space must be None or a jaxpuct.sampled.DiscreteActions, "
                         "FactoredActions or GaussianActions, got "
                         f"{action_space!r} of type {type(action_space).__name__}.")


def check_root(root: Any, *, num_actions: int | None = None,
               action_space: ActionSpace | None = None) -> tuple[int, int]:
    """Checks a root (``jaxpuct.RootFnOutput``); returns ``(B, A)``.

    ``prior_logits`` ``[B, A]`` float, ``value`` ``[B]`` float and finite,
    ``legal_action_mask`` ``[B, A]`` bool (optional), ``state_hash`` ``[B, 2]``
    uint32 (optional), every embedding leaf ``[B, ...]``; prior logits never NaN
    or ``+inf``, and ``-inf`` only on illegal actions. With ``action_space`` (a
    sampled search's, :mod:`jaxpuct.sampled`) the width is the space's: ``A`` for
    ``DiscreteActions(A)``, ``2D`` finite Gaussian parameters for
    ``GaussianActions(D)``, ``n_1 + ... + n_F`` factor values for
    ``FactoredActions``. Raises :class:`ConformanceError`.
    """
    _check_action_space(action_space)
    if action_space is not None:
        num_actions = action_space.params_width
    for name in ("prior_logits", "value", "embedding"):
        if not hasattr(root, name):
            _fail(name, "missing", f"the root has no field {name!r}; build it with "
                  "jaxpuct.RootFnOutput")
    logits = np.asarray(root.prior_logits)
    if logits.ndim != 2:
        _fail("prior_logits", "shape", f"has shape {logits.shape}, expected [B, A]")
    batch, actions = logits.shape
    if batch < 1:
        _fail("prior_logits", "shape", f"has batch size B = {batch} (shape {logits.shape}); "
              "expected B >= 1: the search needs at least one root")
    if num_actions is not None and actions != num_actions:
        if isinstance(action_space, GaussianActions):
            _fail("prior_logits", "shape", f"has width {actions}, expected 2D = {num_actions} "
                  f"(the mean and log std of GaussianActions(D={action_space.action_dim}))")
        if isinstance(action_space, FactoredActions):
            _fail("prior_logits", "shape", f"has width {actions}, expected {num_actions}: "
                  f"the factor values of FactoredActions({action_space.factor_sizes}), "
                  "factor 0's logits first (not the joint actions' logits)")
        _fail("prior_logits", "shape", f"has {actions} actions, expected {num_actions}")
    _check_array("prior_logits", logits, (batch, actions), "float")
    value = _check_array("value", root.value, (batch,), "float")
    if not np.isfinite(value).all():
        _fail("value", "finite", "root value is not finite (NaN or inf)")
    legal = getattr(root, "legal_action_mask", None)
    if legal is not None:
        legal = _check_array("legal_action_mask", legal, (batch, actions), "bool")
    if getattr(root, "state_hash", None) is not None:
        _check_array("state_hash", root.state_hash, (batch, 2), "uint32")
    if isinstance(action_space, GaussianActions):
        _check_gaussian_params("prior_logits", logits, np.arange(batch))
    else:
        _check_logits("prior_logits", logits, legal, np.arange(batch))
    _embedding_spec(root.embedding, batch)
    return batch, actions


def _outputs(out: Any, batch: int, actions: int, with_hash: bool,
             width_hint: str = "") -> dict[str, np.ndarray]:
    """Checks one ``recurrent_fn`` output's fields; returns them as host arrays.
    ``width_hint`` says what ``prior_logits``' ``actions`` columns are, for the error
    when its width differs."""
    fields = {}
    for name in _FLOAT_B + ("prior_logits",):
        if not hasattr(out, name):
            _fail(name, "missing", "the output has no such field; return a "
                  "jaxpuct.RecurrentFnOutput (or mctx.RecurrentFnOutput)")
    for name in _FLOAT_B:
        fields[name] = _check_array(name, getattr(out, name), (batch,), "float")
    width = np.shape(out.prior_logits)[1:]
    if width_hint and width != (actions,):
        _fail("prior_logits", "shape", f"has width {width}, expected {actions}: {width_hint}")
    fields["prior_logits"] = _check_array("prior_logits", out.prior_logits,
                                          (batch, actions), "float")
    if getattr(out, "legal_action_mask", None) is not None:
        fields["legal_action_mask"] = _check_array(
            "legal_action_mask", out.legal_action_mask, (batch, actions), "bool")
    if getattr(out, "terminal", None) is not None:
        fields["terminal"] = _check_array("terminal", out.terminal, (batch,), "bool")
    state_hash = getattr(out, "state_hash", None)
    if with_hash and state_hash is None:
        _fail("state_hash", "missing", "the root has a state_hash but the output does not; "
              "graph search needs one at every node")
    if state_hash is not None:
        fields["state_hash"] = _check_array("state_hash", state_hash, (batch, 2), "uint32")
    return fields


def _random_vectors(rng: np.random.Generator, space: GaussianActions,
                    params: np.ndarray) -> np.ndarray:
    """``[B, D]`` float32: one draw from each row's Gaussian ``params [B, 2D]``, as
    the sampled search draws its actions."""
    mean, log_std = (np.asarray(x, np.float32) for x in space.mean_and_log_std(
        jnp.asarray(params, jnp.float32)))
    return (mean + np.exp(log_std) * rng.standard_normal(mean.shape)).astype(np.float32)


def _action_text(action: np.ndarray) -> str:
    return str(int(action)) if np.ndim(action) == 0 else np.array2string(action, precision=3)


def _random_legal_actions(rng: np.random.Generator, legal: np.ndarray | None, batch: int,
                          actions: int) -> tuple[np.ndarray, np.ndarray]:
    """``(action [B] int32, acted_legally [B] bool)``: uniform over the legal actions
    (action 0 where none is legal)."""
    if legal is None:
        return rng.integers(0, actions, batch).astype(np.int32), np.ones(batch, bool)
    scores = np.where(legal, rng.random(legal.shape), -1.0)
    return np.argmax(scores, axis=1).astype(np.int32), np.asarray(legal.any(axis=1))


def _factor_slices(space: FactoredActions) -> list[slice]:
    """The columns of each factor's values in a ``[B, n_1 + ... + n_F]`` array."""
    ends = np.cumsum(space.factor_sizes)
    return [slice(int(end - n), int(end)) for n, end in zip(space.factor_sizes, ends,
                                                          strict=True)]


def _factors_playable(legal: np.ndarray, space: FactoredActions) -> np.ndarray:
    """``[B]`` bool: every factor has a legal value (some joint action is legal)."""
    return np.asarray(np.stack([legal[:, cols].any(axis=1)
                                for cols in _factor_slices(space)]).all(0))


def _random_factored_actions(rng: np.random.Generator, legal: np.ndarray | None, batch: int,
                             space: FactoredActions) -> tuple[np.ndarray, np.ndarray]:
    """``(joint id [B] int32, acted_legally [B] bool)``: each factor's value uniform
    over its legal values (the joint action uniform over the legal joint actions,
    which are the product of the factors' legal values)."""
    ids = np.zeros(batch, np.int64)
    active = np.ones(batch, bool)
    for n, cols in zip(space.factor_sizes, _factor_slices(space), strict=True):
        value, playable = _random_legal_actions(rng, None if legal is None else legal[:, cols],
                                                batch, n)
        ids, active = ids * n + value, active & playable
    return ids.astype(np.int32), active


def _compare(name: str, check: str, expected: np.ndarray, got: np.ndarray, atol: float,
             what: str) -> None:
    if jnp.issubdtype(expected.dtype, jnp.floating):
        # float32 first: NumPy's allclose does not take bfloat16.
        same = np.allclose(expected.astype(np.float32), np.asarray(got).astype(np.float32),
                           rtol=atol, atol=atol, equal_nan=True)
    else:
        same = np.array_equal(expected, got)
    if not same:
        _fail(name, check, what)


def _state_hash(out: Any, embedding: Any, batch: int,
                hash_fn: Callable[[Any], Any] | None) -> np.ndarray | None:
    """``[B, 2]`` uint32 hash of a state (from ``hash_fn`` when given), or ``None``."""
    if hash_fn is not None:
        return _check_array("hash_fn", hash_fn(embedding), (batch, 2), "uint32")
    state_hash = getattr(out, "state_hash", None)
    return None if state_hash is None else np.asarray(state_hash)


def _optional_fields(recurrent_fn: RecurrentFn, params: Any, key: jax.Array, embedding: Any,
                     action: jax.Array) -> tuple[bool, bool]:
    """``(has legal_action_mask, has terminal)`` of ``recurrent_fn``'s output on
    ``action`` (zeros of the played actions' shape), from ``jax.eval_shape``
    (nothing is computed), or one eager call where that fails."""
    try:
        out, _ = jax.eval_shape(recurrent_fn, params, key, action, embedding)
    except Exception:  # noqa: BLE001 - not traceable: the eager call below says more
        out, _ = recurrent_fn(params, key, action, embedding)
    return (getattr(out, "legal_action_mask", None) is not None,
            getattr(out, "terminal", None) is not None)


def check_recurrent_fn(recurrent_fn: RecurrentFn, params: Any, root: Any, *,
                       num_steps: int = 4, rng_key: jax.Array | None = None,
                       seed: int = 0, check_jit: bool = True,
                       check_batch_independence: bool = True,
                       atol: float = 1e-5,
                       hash_fn: Callable[[Any], Any] | None = None,
                       action_space: ActionSpace | None = None) -> ConformanceReport:
    """Checks ``recurrent_fn`` (and ``root``) against the search's interface.

    Plays ``num_steps`` random legal moves from ``root`` (uniform over each
    element's legal actions; every action where no mask is given) and runs the
    checks of the module docstring at every step. Stops early when no element has
    a legal action left. With ``action_space=GaussianActions(D)`` the moves are
    ``[B, D]`` vectors drawn from each state's Gaussian, with ``FactoredActions``
    joint ids whose factor values are each uniform over that factor's legal values
    (module docstring).

    Args:
      recurrent_fn: ``recurrent_fn(params, rng_key, action, embedding)
        -> (RecurrentFnOutput, embedding)``; ``action`` is ``[B]`` int32 ids, or
        ``[B, D]`` float32 vectors with ``GaussianActions(D)``; joint ids with
        ``FactoredActions``.
      params: passed through to ``recurrent_fn``.
      root: a ``jaxpuct.RootFnOutput`` with ``B`` states (e.g. your ``root_fn``'s
        output). ``B >= 2`` makes the batch-independence check meaningful.
      num_steps: moves played.
      rng_key: the key passed to ``recurrent_fn`` (split per step); default
        ``jax.random.PRNGKey(seed)``.
      seed: NumPy seed of the random moves (and of the default key).
      check_jit: compare ``jax.jit(recurrent_fn)`` with the eager call.
      check_batch_independence: compare each batch element with a call on that
        element alone (a batch of 1 with the same key). A ``recurrent_fn`` that
        draws random numbers from its key for the whole batch legitimately gives
        different numbers for a batch of 1: switch this off for it.
      atol: absolute and relative tolerance of the float comparisons.
      hash_fn: the ``GraphConfig.hash_fn`` graph search will use (``embedding
        [B, ...] -> [B, 2]`` uint32), checked like ``state_hash`` on the root's
        and every new embedding.
      action_space: ``None`` (full-width search) or the
        :func:`jaxpuct.sampled_policy` ``action_space`` the function will be
        searched with: ``DiscreteActions(A)``, ``FactoredActions(sizes)`` or
        ``GaussianActions(D)``.

    Returns:
      A :class:`ConformanceReport` (warnings included).

    Raises:
      ConformanceError: on the first failed check; ``.field`` names the field,
        ``.check`` the check, and the message says what to fix.
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 0:
        raise ValueError(f"num_steps must be an int >= 0, got {num_steps!r}.")
    batch, actions = check_root(root, action_space=action_space)
    gaussian = action_space if isinstance(action_space, GaussianActions) else None
    factored = action_space if isinstance(action_space, FactoredActions) else None
    width_hint = ("" if factored is None else f"the factor values of "
                  f"FactoredActions({factored.factor_sizes}), factor 0's logits first (not "
                  "the joint actions' logits)")
    treedef, spec = _embedding_spec(root.embedding, batch)
    with_hash = getattr(root, "state_hash", None) is not None
    parent_hash = _state_hash(root, root.embedding, batch, hash_fn)
    hash_moves = hash_kept = 0
    legal = getattr(root, "legal_action_mask", None)
    legal = None if legal is None else np.asarray(legal)
    found: list[str] = []
    if gaussian is not None and legal is not None:
        found.append("the root's legal_action_mask is ignored with GaussianActions: every "
                     "sampled vector is an action")
        legal = None
    policy_params = np.asarray(root.prior_logits)
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed) if rng_key is None else rng_key
    jitted = jax.jit(recurrent_fn) if check_jit else None
    embedding = root.embedding
    has_legal = has_terminal = False
    steps = 0
    for step in range(num_steps):
        if factored is not None:
            action_np, active = _random_factored_actions(rng, legal, batch, factored)
        else:
            action_np, active = _random_legal_actions(rng, legal, batch, actions)
        if gaussian is not None:
            action_np = _random_vectors(rng, gaussian, policy_params)
        if not active.any():
            break
        key, step_key = jax.random.split(key)
        action = jnp.asarray(action_np)
        try:
            out, new_embedding = recurrent_fn(params, step_key, action, embedding)
        except Exception as err:  # noqa: BLE001 - reported with its cause
            raise ConformanceError("recurrent_fn", "call", f"raised {type(err).__name__} at "
                                   f"step {step}: {err}") from err
        fields = _outputs(out, batch, actions, with_hash, width_hint)
        _check_embedding(new_embedding, treedef, spec)
        child_hash = _state_hash(out, new_embedding, batch, hash_fn)

        if jitted is not None:
            try:
                jit_out, jit_embedding = jitted(params, step_key, action, embedding)
            except (jax.errors.ConcretizationTypeError,
                    jax.errors.TracerBoolConversionError,
                    jax.errors.TracerIntegerConversionError,
                    jax.errors.TracerArrayConversionError) as err:
                raise ConformanceError(
                    "recurrent_fn", "jit", "is not jit-able: it reads a traced value as a "
                    "Python value (an `if`, `int()` or NumPy call on an array). Use "
                    f"jnp.where / jax.lax.cond / jnp functions instead. JAX said: "
                    f"{type(err).__name__}: {str(err).splitlines()[0]}") from err
            except Exception as err:  # noqa: BLE001 - reported with its cause
                raise ConformanceError("recurrent_fn", "jit", f"fails under jax.jit: "
                                       f"{type(err).__name__}: {err}") from err
            jit_fields = _outputs(jit_out, batch, actions, with_hash)
            for name, value in fields.items():
                _compare(name, "jit", value, jit_fields[name], atol,
                         "differs between jax.jit(recurrent_fn) and the eager call; a "
                         "Python side effect or a value computed outside JAX?")
            for (name, leaf), (_, jit_leaf) in zip(_leaves(new_embedding)[0],
                                                   _leaves(jit_embedding)[0], strict=True):
                _compare(name, "jit", np.asarray(leaf), np.asarray(jit_leaf), atol,
                         "differs between jax.jit(recurrent_fn) and the eager call")

        rows = np.flatnonzero(active)
        for name in _FLOAT_B:
            if not np.isfinite(fields[name][rows]).all():
                bad = int(rows[~np.isfinite(fields[name][rows])][0])
                _fail(name, "finite", f"is {fields[name][bad]} for batch element {bad} at "
                      f"step {step}; every {name} must be finite (a diverged network? "
                      "use jnp.nan_to_num or fix the model)")
        new_legal = fields.get("legal_action_mask")
        if new_legal is not None:
            has_legal = True
        if gaussian is not None:
            _check_gaussian_params("prior_logits", fields["prior_logits"], rows)
            if new_legal is not None and not any("ignored" in f for f in found):
                found.append(f"step {step}: legal_action_mask is ignored with "
                             "GaussianActions: every sampled vector is an action")
            new_legal = None
        else:
            _check_logits("prior_logits", fields["prior_logits"], new_legal, rows)
        if "terminal" in fields:
            has_terminal = True
            terminal = fields["terminal"]
            if new_legal is not None:
                playable = np.asarray(_factors_playable(new_legal, factored)
                                      if factored is not None else new_legal.any(axis=1))
                stuck = rows[~terminal[rows] & ~playable[rows]]
                if stuck.size:
                    what = ("a factor with no legal value, so no legal joint action"
                            if factored is not None else "no legal action")
                    _fail("terminal", "terminal", f"batch element {int(stuck[0])} at step "
                          f"{step} has {what}, but terminal=False; set terminal "
                          "for states where the game is over")
                with_moves = rows[terminal[rows] & playable[rows]]
                if with_moves.size:
                    found.append(f"step {step}: terminal states with legal actions (batch "
                                 f"element {int(with_moves[0])}); the search never expands "
                                 "a terminal state, so its legal mask is ignored")
            nonzero = rows[terminal[rows] & (fields["value"][rows] != 0)]
            if nonzero.size:
                found.append(f"step {step}: terminal states with a non-zero value (batch "
                             f"element {int(nonzero[0])}: {fields['value'][nonzero[0]]}); "
                             "the outcome should be in the reward of the move and the "
                             "value of a terminal state 0")

        if check_batch_independence:
            for b in range(batch):
                one = jax.tree.map(lambda x, b=b: x[b:b + 1], embedding)
                try:
                    out_b, emb_b = recurrent_fn(params, step_key, action[b:b + 1], one)
                except Exception as err:  # noqa: BLE001 - reported with its cause
                    raise ConformanceError(
                        "recurrent_fn", "batch_independence", "failed on a batch of 1 (the "
                        "batch-independence check calls it per element); make it work for "
                        "any B or pass check_batch_independence=False. "
                        f"{type(err).__name__}: {err}") from err
                fields_b = _outputs(out_b, 1, actions, with_hash)
                for name, value in fields.items():
                    _compare(name, "batch_independence", value[b:b + 1], fields_b[name], atol,
                             f"of batch element {b} at step {step} differs from a call on "
                             "that element alone: the output leaks across the batch (a "
                             "reduction over axis 0, a roll, batch statistics?)")
                for (name, leaf), (_, leaf_b) in zip(_leaves(new_embedding)[0],
                                                     _leaves(emb_b)[0], strict=True):
                    _compare(name, "batch_independence", np.asarray(leaf)[b:b + 1],
                             np.asarray(leaf_b), atol,
                             f"of batch element {b} at step {step} differs from a call on "
                             "that element alone: the new state leaks across the batch")
        if child_hash is not None and parent_hash is not None:
            kept = rows[np.all(child_hash[rows] == parent_hash[rows], axis=1)]
            hash_moves, hash_kept = hash_moves + rows.size, hash_kept + kept.size
            if kept.size:
                found.append(f"step {step}: the state hash of batch element {int(kept[0])} "
                             f"did not change with action {_action_text(action_np[kept[0]])}; "
                             "graph search reads that as a move back to the same state")
            parent_hash = child_hash
        embedding = new_embedding
        policy_params = fields["prior_logits"]
        legal = new_legal if new_legal is not None else legal
        if "terminal" in fields:
            legal = (np.ones((batch, actions), bool) if legal is None else legal) & \
                ~fields["terminal"][:, None]
        steps += 1

    if hash_moves and hash_kept == hash_moves:
        _fail("hash_fn" if hash_fn is not None else "state_hash", "hash",
              f"did not change over any of the {hash_moves} moves played: a constant hash "
              "(e.g. all zeros) makes graph search merge every state into one node; hash "
              "the whole state and the player to move (jaxpuct.envs.hashing.zobrist_hash)")
    if steps == 0:
        # Nothing was played (num_steps=0, or no legal move at the root): read which
        # optional fields the output has from its structure alone.
        zeros = (jnp.zeros((batch,), jnp.int32) if gaussian is None
                 else jnp.zeros((batch, gaussian.action_dim), jnp.float32))
        has_legal, has_terminal = _optional_fields(recurrent_fn, params, key, root.embedding,
                                                   zeros)
    for message in found:
        warnings.warn(message, ConformanceWarning, stacklevel=2)
    return ConformanceReport(batch_size=batch, num_actions=actions, num_steps=steps,
                             has_legal_mask=has_legal, has_terminal=has_terminal,
                             has_state_hash=with_hash, warnings=tuple(found),
                             action_dim=None if gaussian is None else gaussian.action_dim)
