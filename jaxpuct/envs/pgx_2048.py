"""pgx's ``2048`` as a stochastic game for :func:`jaxpuct.stochastic_policy`.

pgx (Koyamada et al. 2023) steps 2048 in one call: slide and merge, then a random
tile. Search needs the two halves apart, so this module splits them, using pgx's
own rules for the deterministic half (``pgx.play2048._slide_and_merge`` and
``_legal_action_mask``, private functions of pgx 2.x) and the exact spawn
distribution for the chance half: a 2 (probability 0.9) or a 4 (0.1) on a
uniformly chosen empty cell (pgx ``_add_random_num``, after Cirulli's original
game). The chance outcome ``c`` in ``[0, 32)`` puts exponent ``1 + c % 2`` on cell
``c // 2``; its logit is ``log p`` (``-inf`` on an occupied cell).

Embeddings: a state is the board ``[B, 16]`` int32 of exponents (pgx's
``state._board``); an afterstate is ``(board, score [B])``, the score of the
merge, which the chance edge pays as its reward (discount 1). Without a network
the state value is 0 and the afterstate value is that score: a search then
maximises the expected score over its horizon.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct.stochastic import ChanceRecurrentFnOutput, DecisionRecurrentFnOutput
from jaxpuct.types import RootFnOutput

NUM_ACTIONS = 4
NUM_CELLS = 16
NUM_OUTCOMES = 2 * NUM_CELLS
SPAWN_PROBS = (0.9, 0.1)

# board [B, 16] -> value [B] (e.g. a network on the board); None: 0.
ValueFn = Callable[[jax.Array], jax.Array]


def _rules():
    """pgx's ``play2048`` module, imported on first use. Its import creates JAX
    arrays at module level; imported first inside a trace (a ``jit`` or ``scan``
    of self-play), they would be that trace's tracers and leak into every later
    use, so the import runs with compile-time evaluation."""
    with jax.ensure_compile_time_eval():
        from pgx import play2048
    return play2048


def _move_one(board: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """pgx's slide-and-merge of one ``[16]`` board in direction ``action``."""
    play2048 = _rules()

    grid = board.reshape(4, 4)
    rotated = jax.lax.switch(action, [lambda k=k: jnp.rot90(grid, k) for k in range(4)])
    slid, score = jax.vmap(play2048._slide_and_merge)(rotated)
    back = jax.lax.switch(action, [lambda k=k: jnp.rot90(slid, -k) for k in range(4)])
    return back.ravel(), jnp.sum(score).astype(jnp.float32)


def move(board: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``board [B, 16]``, ``action [B]`` -> ``(afterstate [B, 16], score [B])``."""
    return jax.vmap(_move_one)(board, action)


def legal_actions(board: jax.Array) -> jax.Array:
    """``[B, 4]`` bool, pgx's legal moves (those that change the board)."""
    play2048 = _rules()

    return jax.vmap(lambda b: play2048._legal_action_mask(b.reshape(4, 4)))(board)


def spawn_probs(afterstate: jax.Array) -> jax.Array:
    """``[B, 32]`` exact outcome probabilities on ``afterstate [B, 16]``."""
    empty = (afterstate == 0).astype(jnp.float32)
    per_cell = empty / jnp.maximum(jnp.sum(empty, axis=-1, keepdims=True), 1.0)
    return (per_cell[..., None] * jnp.asarray(SPAWN_PROBS)).reshape(-1, NUM_OUTCOMES)


def spawn(afterstate: jax.Array, outcome: jax.Array) -> jax.Array:
    """The board after outcome ``outcome [B]`` on ``afterstate [B, 16]``."""
    rows = jnp.arange(afterstate.shape[0])
    return afterstate.at[rows, outcome // 2].set(1 + outcome % 2)


def make_search_fns(value_fn: ValueFn | None = None, discount: float = 1.0
                    ) -> tuple[Callable, Callable, Callable]:
    """``(root_fn, decision_recurrent_fn, chance_recurrent_fn)`` for 2048.

    Args:
      value_fn: ``board [B, 16] -> [B]`` value of a state (``None``: 0). An
        afterstate's value is its score plus ``discount`` times the mean
        ``value_fn`` over its outcomes would be exact; here it is the score
        plus ``discount * value_fn(afterstate)``, one evaluation.
      discount: per move.

    ``root_fn(state)`` takes a batched pgx ``State`` (or a board ``[B, 16]``).
    Uniform priors (no policy network); terminal states (no legal move) have
    value 0.
    """

    def value_of(board):
        return (jnp.zeros(board.shape[:1], jnp.float32) if value_fn is None
                else value_fn(board).astype(jnp.float32))

    def evaluate(board):
        legal = legal_actions(board)
        terminal = ~jnp.any(legal, axis=-1)
        return legal, terminal, jnp.where(terminal, 0.0, value_of(board))

    def root_fn(state: Any) -> RootFnOutput:
        board = getattr(state, "_board", state).astype(jnp.int32)
        legal, _, value = evaluate(board)
        return RootFnOutput(prior_logits=jnp.zeros(legal.shape, jnp.float32), value=value,
                            embedding=board, legal_action_mask=legal)

    def decision_fn(params, rng_key, action, board):
        del params, rng_key
        after, score = move(board, action)
        out = DecisionRecurrentFnOutput(chance_logits=jnp.log(spawn_probs(after)),
                                        afterstate_value=score + discount * value_of(after))
        return out, (after, score)

    def chance_fn(params, rng_key, outcome, afterstate):
        del params, rng_key
        after, score = afterstate
        board = spawn(after, outcome)
        legal, terminal, value = evaluate(board)
        out = ChanceRecurrentFnOutput(
            action_logits=jnp.zeros(legal.shape, jnp.float32), value=value, reward=score,
            discount=jnp.where(terminal, 0.0, discount), legal_action_mask=legal,
            terminal=terminal)
        return out, board

    return root_fn, decision_fn, chance_fn
