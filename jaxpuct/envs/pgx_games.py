"""pgx games as jaxpuct environments (pgx is an optional dependency).

``make_pgx_game(name)`` wraps a pgx environment (Koyamada et al. 2023, "Pgx:
Hardware-Accelerated Parallel Game Simulators for Reinforcement Learning") in a
batched :class:`jaxpuct.envs.adapter.Environment`, with a Zobrist state hash for graph
search. pgx is imported inside the functions only, so ``import jaxpuct`` never
imports it.

pgx conventions this module relies on (pgx 2.x, ``pgx/core.py`` and the games):

* A pgx state is unbatched; the functions here ``jax.vmap`` ``env.init`` and
  ``env.step`` over a leading ``[B]`` axis (a step of one row calls the
  unbatched step: :func:`batched_step`).
* ``state.current_player`` is a player *id* (0 or 1) that is assigned to the
  first or second colour at random by ``env.init``; it is not the colour. In the
  games here it changes on every step, including a pass and the move that ends
  the game.
* ``state.rewards`` is ``[2]`` (``[B, 2]`` batched), indexed by player id, and
  non-zero only on the step that ends the game. The reward to the player who
  moved is therefore ``new_state.rewards[prev_state.current_player]``: the mover
  must be read *before* the step, since ``current_player`` changes with it.
* ``state.observation`` is from the view of ``state.current_player`` (the player
  to move): e.g. in tic-tac-toe plane 0 holds the mover-to-be's marks.
* ``state.legal_action_mask`` is set to all ``True`` at terminal states (to
  avoid dividing by zero when normalising a policy). ``Environment.legal_mask``
  passes it through as it is; the search's adapter (:mod:`jaxpuct.envs.adapter`)
  reports no legal action there (``legal & ~terminal``).
* ``env.step`` on a terminal state returns it unchanged with zero rewards; an
  illegal action ends the game with reward -1 to the mover (+1 to the other).
* ``state.truncated`` is never set by these games (only by wrappers); the
  environment here treats ``terminated | truncated`` as terminal.

The state hash (``Environment.state_hash``) is a Zobrist hash
(:func:`jaxpuct.envs.hashing.zobrist_hash`) of the board in absolute colours, the
colour to move and the few extra facts that decide the future of the position.
How the board is read from ``state._x`` (pgx's internal game state) per game:

* ``tic_tac_toe``: ``_x.board`` ``[9]``, ``-1`` empty, ``0`` first player (X),
  ``1`` second (O); colour to move ``_x.color``.
* ``connect_four``: ``_x.board`` ``[42]`` (row-major 6x7, top row first), same
  values; colour to move ``_x.color``.
* ``othello``: ``_x.board`` ``[64]`` is relative to the player to move (``+1``
  theirs, ``-1`` the opponent's, ``0`` empty); ``_x.turn`` (0 for the first
  player) makes it absolute: ``board * (1 - 2 * turn)``. Colour to move
  ``_x.turn``; extra cell: ``_x.passed`` (the previous move was a pass; a second
  pass ends the game).
* ``go_9x9``: ``_x.board`` ``[81]`` holds chain ids, positive for black and
  negative for white, 0 empty, so ``sign(board)`` is the position; colour to
  move ``_x.color`` (``step_count % 2``, 0 = black); extra cells: the simple-ko
  point ``_x.ko`` (``-1`` for none) and ``min(_x.consecutive_pass_count, 2)``.
  Not hashed, so graph search treats them as equal: the history that pgx's
  positional-superko rule and its step limit (``9 * 9 * 2`` moves) depend on,
  and the board history in the observation.

The colour to move, not the player id, enters the hash: values are from the
mover's view, so which id holds which colour does not change a position's value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct.envs.adapter import Environment
from jaxpuct.envs.hashing import zobrist_hash

PGX_GAMES: tuple[str, ...] = ("tic_tac_toe", "connect_four", "othello", "go_9x9")

PgxState = Any


@dataclasses.dataclass(frozen=True)
class PgxGame:
    """A pgx game ready for search.

    Attributes:
      name: the pgx environment id.
      env: the pgx environment (unbatched).
      num_actions: ``A``.
      observation_shape: the shape of one observation, ``(H, W, C)``.
      environment: batched functions for :func:`jaxpuct.envs.adapter.make_root_fn`
        and :func:`jaxpuct.envs.adapter.make_recurrent_fn`, with ``state_hash``.
    """

    name: str
    env: Any
    num_actions: int
    observation_shape: tuple[int, ...]
    environment: Environment

    def init(self, rng_key: jax.Array, batch_size: int) -> PgxState:
        """``batch_size`` initial states, each leaf ``[B, ...]``; the player id of
        the first mover is drawn at random per game (pgx's ``init``)."""
        return jax.vmap(self.env.init)(jax.random.split(rng_key, batch_size))


def _board_hash(state: PgxState) -> jax.Array:
    """tic_tac_toe, connect_four: ``[B, 2]`` uint32."""
    x = state._x
    return zobrist_hash(x.board + 1, x.color, num_values=3)


def _othello_hash(state: PgxState) -> jax.Array:
    """othello: ``[B, 2]`` uint32."""
    x = state._x
    sign = 1 - 2 * x.turn[:, None]
    cells = jnp.concatenate([x.board * sign + 1, x.passed[:, None].astype(jnp.int32)], axis=1)
    return zobrist_hash(cells, x.turn, num_values=3)


def _go_hash(state: PgxState) -> jax.Array:
    """go: ``[B, 2]`` uint32."""
    x = state._x
    num_points = x.board.shape[-1]
    cells = jnp.concatenate([
        jnp.sign(x.board) + 1,
        x.ko[:, None] + 1,
        jnp.minimum(x.consecutive_pass_count, 2)[:, None],
    ], axis=1)
    return zobrist_hash(cells, x.color, num_values=num_points + 1)


_HASHES: dict[str, Callable[[PgxState], jax.Array]] = {
    "tic_tac_toe": _board_hash,
    "connect_four": _board_hash,
    "othello": _othello_hash,
    "go_9x9": _go_hash,
}


def _mover_reward(prev_state: PgxState, state: PgxState) -> jax.Array:
    """``[B]``: the reward of the step to the player who moved in ``prev_state``."""
    mover = prev_state.current_player
    return jnp.take_along_axis(state.rewards, mover[:, None].astype(jnp.int32), axis=1)[:, 0]


def batched_step(step: Callable[[PgxState, jax.Array], PgxState]
                 ) -> Callable[[PgxState, jax.Array], PgxState]:
    """``(state [B, ...], action [B]) -> state``: pgx's unbatched ``step`` over the
    leading axis; with one row (known at trace time) the unbatched step itself.

    Under ``vmap`` every ``lax.cond`` of pgx's step (the finished-game, illegal-move
    and terminal-mask branches) becomes a ``select`` that computes both sides; with
    one row they stay conditionals and only the taken side runs. One search at a
    time (``B = 1``) takes this path: 3-11% less time per simulation measured on
    tic-tac-toe and connect four (``docs/benchmarks.md``). The states are the same.
    """
    over_batch = jax.vmap(step)

    def batched(state: PgxState, action: jax.Array) -> PgxState:
        if action.shape[0] != 1:
            return over_batch(state, action)
        one = step(jax.tree.map(lambda x: x[0], state), action[0])
        return jax.tree.map(lambda x: x[None], one)

    return batched


def pgx_environment(env: Any, state_hash: Callable[[PgxState], jax.Array] | None = None
                    ) -> Environment:
    """Batched :class:`Environment` functions for any two-player pgx ``env``.

    Args:
      env: a pgx environment (from ``pgx.make``).
      state_hash: optional ``state -> [B, 2] uint32``.
    """
    return Environment(
        step=batched_step(env.step),
        observe=lambda state: state.observation,
        legal_mask=lambda state: state.legal_action_mask,
        terminal=lambda state: jnp.logical_or(state.terminated, state.truncated),
        reward=_mover_reward,
        state_hash=state_hash,
    )


def make_pgx_game(name: str) -> PgxGame:
    """Builds a :class:`PgxGame` for one of :data:`PGX_GAMES`.

    Args:
      name: ``"tic_tac_toe"``, ``"connect_four"``, ``"othello"`` or ``"go_9x9"``.

    Raises:
      ValueError: for another name (the message lists the accepted ones).
      ImportError: when pgx is not installed.
    """
    if name not in PGX_GAMES:
        raise ValueError(f"unknown pgx game {name!r}; accepted names: {', '.join(PGX_GAMES)}")
    try:
        import pgx
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("make_pgx_game needs pgx: pip install 'jaxpuct[examples]' "
                          "or pip install pgx") from err
    # pgx imports a game's module on first use, and those modules build arrays at
    # import time: imported inside a jit trace (a game made in a jitted function),
    # they would hold leaked tracers for the rest of the process.
    with jax.ensure_compile_time_eval():
        # name is one of PGX_GAMES (checked above), each a pgx EnvId literal.
        env = pgx.make(name)  # pyright: ignore[reportArgumentType]
    probe = jax.eval_shape(env.init, jax.random.PRNGKey(0))  # shapes only, no compute
    return PgxGame(
        name=name,
        env=env,
        num_actions=int(probe.legal_action_mask.shape[-1]),
        observation_shape=tuple(int(d) for d in probe.observation.shape),
        environment=pgx_environment(env, _HASHES[name]),
    )


def symmetries(name: str):
    """The board symmetries of a :data:`PGX_GAMES` game, for evaluating the network
    under a random or averaged symmetry (:mod:`jaxpuct.envs.symmetries`).

    ``tic_tac_toe``, ``othello`` and ``go_9x9``: the 8 dihedral symmetries (the
    pass action of othello and Go fixed); ``connect_four``: identity and the
    left-right mirror. Observations are ``[B, H, W, C]`` and board actions the
    row-major cells (columns in connect four), as pgx lays them out. Needs no pgx.

    Raises:
      ValueError: for another name (the message lists the accepted ones).
    """
    from jaxpuct.envs import symmetries as sym  # only NumPy tables; no pgx

    tables = {"tic_tac_toe": lambda: sym.dihedral(3),
              "connect_four": lambda: sym.left_right(6, 7),
              "othello": lambda: sym.dihedral(8, num_pass_actions=1),
              "go_9x9": lambda: sym.dihedral(9, num_pass_actions=1)}
    if name not in tables:
        raise ValueError(f"unknown pgx game {name!r} for symmetries; accepted names: "
                         f"{', '.join(tables)}")
    return tables[name]()


def rollout_rules(name: str) -> dict[str, Any]:
    """The keywords of :func:`jaxpuct.envs.rollouts.make_recurrent_fn` that play a
    :data:`PGX_GAMES` game's rollouts on cheaper rules of the same game, the tree
    keeping pgx's states: ``rollout_env`` and ``rollout_state`` for ``connect_four``
    (:mod:`jaxpuct.envs.connect_four`, whose move tests only the lines through the new
    stone; the same rollouts, bit for bit), ``{}`` (pgx's own rules) for the others.
    Needs no pgx.

    Raises:
      ValueError: for another name (the message lists the accepted ones).
    """
    if name not in PGX_GAMES:
        raise ValueError(f"unknown pgx game {name!r} for rollout_rules; accepted names: "
                         f"{', '.join(PGX_GAMES)}")
    if name == "connect_four":
        from jaxpuct.envs import connect_four
        return {"rollout_env": connect_four.environment(),
                "rollout_state": connect_four.from_pgx}
    return {}
