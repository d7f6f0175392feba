"""jax.random's Threefry streams, computed elementwise over a batch of keys.

Every random number a search draws (its keys' splits and ``fold_in``s, the Gumbel
draw, tie-breaking noise, a sampled move, the root's Dirichlet noise) goes through
these functions. Except :func:`log_gamma` (a sampler of its own), for keys of
JAX's default implementation (Threefry-2x32, Salmon et al. 2011, "Parallel random
numbers: as easy as 1, 2, 3") with ``jax_threefry_partitionable`` on (JAX's default),
they return exactly what ``jax.vmap`` of the matching ``jax.random`` function
returns, bit for bit, and ``tests/test_prng.py`` checks that against ``jax.random``.

Why not call ``jax.random``: on CPU JAX lowers every Threefry call to a rolled loop of
five iterations, several XLA kernels of its own, and a search's key chain (split,
split per tree, a key per use, the draw) is four such calls in a row, which XLA can
neither fuse nor drop. Written out as uint32 arithmetic, the chain is one or two
elementwise kernels: on the connect-four self-play step this was about a fifth of the
Gumbel search's compiled code (``docs/benchmarks.md``, "Compile time"). On GPU it saves
the launches of JAX's Threefry kernel.

Keys of any other implementation (``jax.random.key(0, impl="rbg")``, a raw key under
another ``jax_default_prng_impl``), the non-partitionable Threefry, and float draws
under ``jax_enable_x64`` (where ``jax.random``'s default dtype is float64) go to
``jax.random`` itself, vmapped over the batch: the same results as before, at the old
compile cost.

Shapes: ``keys`` is a batch of keys with batch shape ``[*batch]`` (raw keys
``uint32[*batch, 2]``, typed keys ``key<fry>[*batch]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = np.uint32(0x1BD11BDA)
_MANTISSA_SHIFT = np.uint32(32 - 23)
_ONE_BITS = np.uint32(0x3F800000)


def _typed(keys: jax.Array) -> bool:
    return jnp.issubdtype(keys.dtype, jax.dtypes.prng_key)


def batch_shape(keys: jax.Array) -> tuple[int, ...]:
    """The batch shape of ``keys``: ``[*batch]`` for typed or raw ``[*batch, 2]`` keys."""
    return tuple(keys.shape) if _typed(keys) else tuple(keys.shape[:-1])


def is_threefry(keys: jax.Array) -> bool:
    """Whether ``keys`` are Threefry-2x32 keys whose ``jax.random`` streams this module
    reproduces (decided at trace time, from the dtype and JAX's configuration)."""
    # Older JAX (before 0.5) hashes split counters the non-partitionable way.
    if not getattr(jax.config, "jax_threefry_partitionable", False):
        return False
    if _typed(keys):
        return str(jax.random.key_impl(keys)) == "threefry2x32"
    return (keys.dtype == jnp.uint32 and keys.ndim >= 1 and keys.shape[-1] == 2
            and getattr(jax.config, "jax_default_prng_impl", None) == "threefry2x32")


def _floats_exact(keys: jax.Array) -> bool:
    # Under x64, jax.random draws float64 by default: another stream.
    return is_threefry(keys) and not getattr(jax.config, "jax_enable_x64", False)


def _words(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    data = jax.random.key_data(keys) if _typed(keys) else keys
    return data[..., 0], data[..., 1]


def _like(keys: jax.Array, word0: jax.Array, word1: jax.Array) -> jax.Array:
    data = jnp.stack([word0, word1], axis=-1)
    if _typed(keys):
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(keys))
    return data


def _rotate_left(x: jax.Array, bits: int) -> jax.Array:
    return (x << np.uint32(bits)) | (x >> np.uint32(32 - bits))


def threefry2x32(key0: jax.Array, key1: jax.Array, count0: jax.Array,
                 count1: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32, 20 rounds, on uint32 arrays that broadcast together.

    Returns the two output words, each of the broadcast shape.
    """
    schedule = (key0, key1, key0 ^ key1 ^ _KEY_PARITY)
    x0, x1 = count0 + schedule[0], count1 + schedule[1]
    for block in range(5):
        for bits in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, bits) ^ x0
        x0 = x0 + schedule[(block + 1) % 3]
        x1 = x1 + schedule[(block + 2) % 3] + np.uint32(block + 1)
    return x0, x1


def _hash(keys: jax.Array, counters: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """Each key of ``keys [*batch]`` hashed with every counter ``(0, c)`` of
    ``counters [*shape]``: two uint32 words of shape ``[*batch, *shape]``."""
    word0, word1 = _words(keys)
    extra = (None,) * counters.ndim
    word0, word1 = word0[(..., *extra)], word1[(..., *extra)]
    low = jnp.asarray(counters, jnp.uint32)
    return threefry2x32(word0, word1, jnp.zeros_like(low), low)


def _counters(shape: tuple[int, ...]) -> np.ndarray:
    size = math.prod(shape)
    if size >= 2**32:
        raise ValueError(f"a draw of shape {list(shape)} has more than 2**32 numbers.")
    return np.arange(size, dtype=np.uint32).reshape(shape)


def _vmapped(fn: Callable[[jax.Array], jax.Array], keys: jax.Array) -> jax.Array:
    for _ in batch_shape(keys):
        fn = jax.vmap(fn)
    return fn(keys)


def split(keys: jax.Array, num: int) -> jax.Array:
    """``jax.random.split(key, num)`` of every key: keys ``[*batch, num]``."""
    if not is_threefry(keys):
        return _vmapped(lambda k: jax.random.split(k, num), keys)
    word0, word1 = _hash(keys, _counters((num,)))
    return _like(keys, word0, word1)


def fold_in(keys: jax.Array, data: jax.Array | int) -> jax.Array:
    """``jax.random.fold_in(key, data)`` of every key: keys ``[*batch]``.

    ``data`` is an integer scalar (folded into every key), an integer array of shape
    ``[*batch]`` (one per key), or, for one key (``batch = []``), an array ``[n]``: that
    key folded with each, keys ``[n]``.
    """
    data = jnp.asarray(data)
    if not is_threefry(keys):
        if data.ndim == 0:
            return _vmapped(lambda k: jax.random.fold_in(k, data), keys)
        if not batch_shape(keys):
            return jax.vmap(lambda d: jax.random.fold_in(keys, d))(data)
        fold: Callable = jax.random.fold_in
        for _ in batch_shape(keys):
            fold = jax.vmap(fold)
        return fold(keys, data)
    word0, word1 = _words(keys)
    low = data.astype(jnp.uint32)
    word0, word1 = threefry2x32(word0, word1, jnp.zeros_like(low), low)
    return _like(keys, word0, word1)


def bits(keys: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """``jax.random.bits(key, shape)`` (uint32) of every key: ``[*batch, *shape]``."""
    if not is_threefry(keys):
        return _vmapped(lambda k: jax.random.bits(k, shape), keys)
    word0, word1 = _hash(keys, _counters(shape))
    return word0 ^ word1


def uniform(keys: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """``jax.random.uniform(key, shape)`` (in [0, 1)) of every key: ``[*batch, *shape]``."""
    if not _floats_exact(keys):
        return _vmapped(lambda k: jax.random.uniform(k, shape), keys)
    return _unit_floats(bits(keys, shape))


def _unit_floats(raw: jax.Array) -> jax.Array:
    # 23 random mantissa bits under the exponent of 1.0: a float in [1, 2), minus 1.
    mantissa = (raw >> _MANTISSA_SHIFT) | _ONE_BITS
    return jax.lax.bitcast_convert_type(mantissa, jnp.float32) - np.float32(1.0)


def gumbel(keys: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """``jax.random.gumbel(key, shape)`` of every key: ``[*batch, *shape]``."""
    if not _floats_exact(keys):
        return _vmapped(lambda k: jax.random.gumbel(k, shape), keys)
    tiny = np.float32(np.finfo(np.float32).tiny)
    floats = _unit_floats(bits(keys, shape))
    # jax.random draws uniform(minval=tiny, maxval=1), so -log never sees a zero.
    unit = jnp.maximum(tiny, floats * (np.float32(1.0) - tiny) + tiny)
    return -jnp.log(-jnp.log(unit))


def categorical(keys: jax.Array, logits: jax.Array) -> jax.Array:
    """``jax.random.categorical(key, logits)`` of every key over the last axis of
    ``logits [*batch, A]``: int32 ``[*batch]``."""
    if not _floats_exact(keys) or logits.dtype != jnp.float32:
        fn: Callable = jax.random.categorical
        for _ in batch_shape(keys):
            fn = jax.vmap(fn)
        return fn(keys, logits)
    noise = gumbel(keys, (logits.shape[-1],))
    return jnp.argmax(noise + logits, axis=-1)


def _open_unit_floats(raw: jax.Array) -> jax.Array:
    # The 23 top bits as a float in (0, 1): a half step away from both ends, so that
    # log and the inverse error function stay finite.
    return ((raw >> _MANTISSA_SHIFT).astype(jnp.float32) + np.float32(0.5)) * np.float32(2.0**-23)


# Rounds of the gamma sampler's rejection loop before it gives up on a draw. A round
# accepts with probability above 0.95 for every alpha (Marsaglia and Tsang 2000), so a
# draw still open after 32 rounds has probability below 0.05**32.
GAMMA_ROUNDS = 32
_BOOST_SALT = 0x6A09E667


def log_gamma(keys: jax.Array, alpha: chex.Numeric, shape: tuple[int, ...]
              ) -> jax.Array:
    """``log`` of Gamma(``alpha``, 1) draws, ``[*batch, *shape]``, every draw of a key
    from that key alone.

    Marsaglia and Tsang's rejection method (2000, "A simple method for generating
    gamma variables"), for ``alpha < 1`` boosted as ``Gamma(alpha + 1) * U**(1 / alpha)``
    and kept in log space, so that tiny alphas (Go's 0.03) do not underflow to 0.
    Vectorised: each round proposes for every draw at once (a normal and a uniform
    from ``fold_in(key, round)``) and keeps the first accepted proposal; the loop ends
    when every draw has one (after at most :data:`GAMMA_ROUNDS` rounds; a draw never
    accepted, probability below ``0.05**32``, keeps ``log(alpha - 1/3)``, the method's
    centre, of the boosted alpha where boosted). ``jax.random.gamma`` instead runs one
    draw after another on CPU (``lax.map``), each with its own loops: at B = 1024,
    A = 362 it took 365 ms, and its compile about a second. Not ``jax.random``'s stream.

    ``alpha`` broadcasts against ``[*batch, *shape]``; where it is not a positive
    finite number the draw is NaN.
    """
    batch = batch_shape(keys)
    full = batch + tuple(shape)
    alpha = jnp.broadcast_to(jnp.asarray(alpha, jnp.float32), full)
    boosted = alpha < 1
    a = jnp.where(boosted, alpha + 1, alpha)
    d = a - np.float32(1 / 3)
    c = jax.lax.rsqrt(np.float32(9.0) * d)
    log_d = jnp.log(d)

    def round_(state):
        step, open_, log_g = state
        raw = bits(fold_in(keys, step), tuple(shape) + (2,))
        normal = np.float32(np.sqrt(2.0)) * jax.lax.erf_inv(
            np.float32(2.0) * _open_unit_floats(raw[..., 0]) - np.float32(1.0))
        cube_root = np.float32(1.0) + c * normal
        v = cube_root * cube_root * cube_root
        log_v = jnp.log(jnp.where(v > 0, v, np.float32(1.0)))
        log_u = jnp.log(_open_unit_floats(raw[..., 1]))
        accept = (v > 0) & (log_u < np.float32(0.5) * normal * normal + d - d * v + d * log_v)
        take = open_ & accept
        return step + 1, open_ & ~accept, jnp.where(take, log_d + log_v, log_g)

    def more(state):
        step, open_, _ = state
        return (step < GAMMA_ROUNDS) & jnp.any(open_)

    start = (jnp.zeros((), jnp.int32), jnp.isfinite(d) & (d > 0), log_d)
    _, _, log_g = jax.lax.while_loop(more, round_, start)
    boost = jnp.log(_open_unit_floats(bits(fold_in(keys, _BOOST_SALT), tuple(shape))))
    log_g = jnp.where(boosted, log_g + boost / jnp.where(boosted, alpha, 1.0), log_g)
    return jnp.where(jnp.isfinite(alpha) & (alpha > 0), log_g, jnp.nan)
