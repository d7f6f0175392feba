"""Exact oracles for testing jaxpuct's search.

Two families of games whose exact values are known, each with a batched, jit-able
``recurrent_fn`` that fits the mctx-compatible interface of ``jaxpuct.types``:

* **Tic-tac-toe** (``ttt_*``): JAX rules, NumPy rules, and exact minimax over every
  reachable position (5478 in all, 4520 of them non-terminal).
* **Random finite games** (``random_game*``): random trees (or DAGs, for graph search)
  with illegal actions, terminals at varying depths and rewards on transitions, solved
  exactly by backward induction.

Conventions (those of mctx and pgx, restated in DESIGN.md §2):

* a value is from the view of the player to move at its node;
* a reward is from the view of the player who made the move;
* ``Q(s, a) = reward(s, a) + discount(s, a) * V(child)``, with ``discount = -1`` when
  the player to move changes (two-player zero-sum), ``+1`` or ``gamma`` otherwise;
* a terminal state has value 0 and no legal action: the outcome is in the reward of
  the move that reached it;
* an illegal action ends the game and its mover loses (reward -1); acting in a
  terminal state gives reward 0 and stays terminal (pgx does the same for illegal
  actions). The search should never do either; these rules only make such a bug
  visible instead of undefined.

The priors are uniform (zero logits, also on illegal actions: the search is expected
to mask them with ``legal_action_mask``). Wrap a function with
``mask_illegal_logits`` for searches that do not read the mask (e.g. mctx).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import chex
import jax.numpy as jnp
import numpy as np

try:
    from jaxpuct.types import RecurrentFnOutput, RootFnOutput
except ModuleNotFoundError:
    # `pytest` (unlike `python -m pytest`) does not put the repo root on sys.path and
    # the package may not be installed; fall back to the checkout this file lives in.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from jaxpuct.types import RecurrentFnOutput, RootFnOutput

RecurrentFn = Callable[[Any, chex.PRNGKey, chex.Array, Any], tuple[Any, Any]]

# Finite (not -inf) so that softmax, temperature or noise never produce NaN, yet
# exp(MASKED_LOGIT - max) underflows to exactly 0 in float32.
MASKED_LOGIT = -1e9


def masked_logits(logits: chex.Array, legal: chex.Array) -> chex.Array:
    """``[B, A]`` logits with illegal entries set to ``MASKED_LOGIT``."""
    return jnp.where(legal, logits, jnp.asarray(MASKED_LOGIT, logits.dtype))


def mask_illegal_logits(recurrent_fn: RecurrentFn) -> RecurrentFn:
    """Wraps ``recurrent_fn`` so that its prior puts zero mass on illegal actions.

    For searches that ignore ``legal_action_mask`` below the root (mctx): they can
    still pick an illegal action when every legal one scores lower, so equality with
    such a search only holds on games where every action is legal.
    """

    def fn(params: Any, rng_key: chex.PRNGKey, action: chex.Array, embedding: Any):
        out, new_embedding = recurrent_fn(params, rng_key, action, embedding)
        logits = masked_logits(out.prior_logits, out.legal_action_mask)
        return out.replace(prior_logits=logits), new_embedding

    return fn


def mask_root_logits(root: RootFnOutput) -> RootFnOutput:
    """``root`` with its prior's illegal entries set to ``MASKED_LOGIT``."""
    return root.replace(prior_logits=masked_logits(root.prior_logits, root.legal_action_mask))


# --------------------------------------------------------------------------------------
# Tic-tac-toe: NumPy / plain-Python rules and exact minimax.
#
# A Position is a tuple of 9 ints, row-major (cell 0 top-left, 8 bottom-right), in
# absolute terms: 1 = X, -1 = O, 0 = empty. X moves first, so the player to move
# follows from the stone counts and a Position is a complete game state.
# --------------------------------------------------------------------------------------

Position = tuple[int, ...]

TTT_NUM_ACTIONS = 9
TTT_EMPTY: Position = (0,) * 9
TTT_LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8],  # rows
     [0, 3, 6], [1, 4, 7], [2, 5, 8],  # columns
     [0, 4, 8], [2, 4, 6]],  # diagonals
    dtype=np.int32,
)  # [8, 3]
_BASE3 = 3 ** np.arange(9, dtype=np.int64)  # [9]


def ttt_parse(text: str) -> Position:
    """Position from a string such as ``"XO. .X. ..O"``.

    ``X``/``x`` = X, ``O``/``o``/``0`` = O, ``.``/``-``/``_`` = empty; whitespace,
    ``/`` and ``|`` are ignored. Raises ``ValueError`` for an impossible stone count.
    """
    symbols = {"X": 1, "O": -1, "0": -1, ".": 0, "-": 0, "_": 0}
    cells = [symbols[c.upper()] for c in text if not (c.isspace() or c in "/|")]
    if len(cells) != 9:
        raise ValueError(f"expected 9 cells, got {len(cells)} in {text!r}")
    pos = tuple(cells)
    if pos.count(1) - pos.count(-1) not in (0, 1):
        raise ValueError(f"impossible stone counts in {text!r}")
    return pos


def ttt_format(pos: Position) -> str:
    """``"XO./.X./..O"``: the inverse of ``ttt_parse``."""
    chars = "".join({1: "X", -1: "O", 0: "."}[c] for c in pos)
    return "/".join(chars[i:i + 3] for i in range(0, 9, 3))


def ttt_to_move(pos: Position) -> int:
    """``1`` if X is to move, ``-1`` if O is."""
    return 1 if pos.count(1) == pos.count(-1) else -1


def ttt_winner(pos: Position) -> int:
    """``1`` if X has three in a row, ``-1`` if O has, ``0`` otherwise."""
    for line in TTT_LINES:
        s = sum(pos[i] for i in line)
        if abs(s) == 3:
            return s // 3
    return 0


def ttt_is_terminal(pos: Position) -> bool:
    """Whether someone has won or the board is full."""
    return ttt_winner(pos) != 0 or 0 not in pos


def ttt_legal_moves(pos: Position) -> list[int]:
    """Empty cells, ascending; ``[]`` at a terminal position."""
    return [] if ttt_is_terminal(pos) else [i for i, c in enumerate(pos) if c == 0]


def ttt_play(pos: Position, action: int) -> Position:
    """The position after the player to move plays ``action``. Raises if illegal."""
    if action not in ttt_legal_moves(pos):
        raise ValueError(f"illegal move {action} in {ttt_format(pos)}")
    cells = list(pos)
    cells[action] = ttt_to_move(pos)
    return tuple(cells)


def ttt_code(pos: Position) -> int:
    """Base-3 code of a position in ``[0, 3**9)``: digit ``i`` is cell ``i`` (O -> 2)."""
    return int(sum(_BASE3[i] * (2 if c == -1 else c) for i, c in enumerate(pos)))


@functools.cache
def ttt_minimax_value(pos: Position) -> int:
    """Exact game value (+1 win / 0 draw / -1 loss) for the player to move.

    Negamax (Knuth & Moore, "An analysis of alpha-beta pruning", 1975) memoised over
    positions. At a terminal position this is the outcome for the player to move
    (-1 if the opponent just completed a line, 0 for a full board) -- note that the
    search stores 0 there instead, the outcome being in the reward of the last move.
    """
    if ttt_is_terminal(pos):
        return -1 if ttt_winner(pos) != 0 else 0
    return max(-ttt_minimax_value(ttt_play(pos, a)) for a in ttt_legal_moves(pos))


def ttt_qvalues(pos: Position) -> np.ndarray:
    """``[9]`` exact ``Q(pos, a)`` for the player to move; NaN where ``a`` is illegal.

    Equals ``reward + (-1) * V(child)`` with the search's convention (``V = 0`` at a
    terminal child, +1 reward for a winning move).
    """
    q = np.full(9, np.nan)
    for a in ttt_legal_moves(pos):
        q[a] = -ttt_minimax_value(ttt_play(pos, a))
    return q


def ttt_optimal_moves(pos: Position) -> set[int]:
    """The legal moves that achieve the minimax value (empty at a terminal position)."""
    v = ttt_minimax_value(pos)
    return {a for a in ttt_legal_moves(pos) if -ttt_minimax_value(ttt_play(pos, a)) == v}


@functools.cache
def _ttt_reachable() -> tuple[Position, ...]:
    """Every position reachable from the empty board, sorted by (stones, code)."""
    seen = {TTT_EMPTY}
    stack = [TTT_EMPTY]
    while stack:
        pos = stack.pop()
        for a in ttt_legal_moves(pos):
            child = ttt_play(pos, a)
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return tuple(sorted(seen, key=lambda p: (9 - p.count(0), ttt_code(p))))


def ttt_all_positions(include_terminal: bool = False) -> list[Position]:
    """Reachable positions in a fixed order (by number of stones, then ``ttt_code``).

    4520 non-terminal positions; 5478 with ``include_terminal=True``.
    """
    return [p for p in _ttt_reachable() if include_terminal or not ttt_is_terminal(p)]


@functools.cache
def ttt_value_table() -> np.ndarray:
    """``[3**9]`` float32 exact values indexed by ``ttt_code``, in the search's convention.

    Minimax value for the player to move at reachable non-terminal positions; 0 at
    terminal and unreachable ones. Read-only.
    """
    table = np.zeros(3**9, np.float32)
    for pos in ttt_all_positions():
        table[ttt_code(pos)] = ttt_minimax_value(pos)
    table.setflags(write=False)
    return table


# --------------------------------------------------------------------------------------
# Tic-tac-toe in JAX.
# --------------------------------------------------------------------------------------


@chex.dataclass(frozen=True)
class TTTState:
    """A batch of tic-tac-toe states (the search's embedding).

    Attributes:
      board: ``[B, 9]`` int8 relative board: +1 = stones of the player to move,
        -1 = the opponent's, 0 = empty. Relative, so that a value net could read it
        without knowing whose turn it is.
      player: ``[B]`` int8, +1 if X is to move, -1 if O is (``board * player`` is
        the absolute board).
      terminal: ``[B]`` bool, the game is over (a line, a full board, or an illegal
        move).
    """

    board: chex.Array
    player: chex.Array
    terminal: chex.Array


def ttt_initial(batch: int) -> TTTState:
    """``batch`` empty boards with X to move."""
    return TTTState(
        board=jnp.zeros((batch, 9), jnp.int8),
        player=jnp.ones((batch,), jnp.int8),
        terminal=jnp.zeros((batch,), bool),
    )


def ttt_batch(positions: Sequence[Position]) -> TTTState:
    """A ``TTTState`` of batch ``len(positions)`` from absolute positions."""
    absolute = np.asarray(positions, np.int8).reshape(len(positions), 9)
    player = np.array([ttt_to_move(p) for p in positions], np.int8)
    terminal = np.array([ttt_is_terminal(p) for p in positions], bool)
    return TTTState(
        board=jnp.asarray(absolute * player[:, None]),
        player=jnp.asarray(player),
        terminal=jnp.asarray(terminal),
    )


def ttt_unbatch(state: TTTState) -> list[Position]:
    """Absolute positions of a ``TTTState`` (the inverse of ``ttt_batch``)."""
    absolute = np.asarray(state.board, np.int64) * np.asarray(state.player, np.int64)[:, None]
    return [tuple(int(c) for c in row) for row in absolute]


def ttt_legal(state: TTTState) -> chex.Array:
    """``[B, 9]`` bool: empty cells, none at a terminal state."""
    return (state.board == 0) & ~state.terminal[:, None]


def _ttt_has_line(board: chex.Array) -> chex.Array:
    """``[B]`` bool: the stones marked +1 in ``board [B, 9]`` contain a line."""
    return jnp.any(jnp.all(board[:, TTT_LINES] == 1, axis=-1), axis=-1)


def ttt_step(state: TTTState, action: chex.Array) -> tuple[TTTState, chex.Array, chex.Array]:
    """Plays ``action [B]`` int32 for the player to move.

    Returns:
      ``(new_state, reward [B] float32, terminal [B] bool)``; the reward is from the
      mover's view: +1 for completing a line, -1 for an illegal move (the game ends,
      board unchanged), 0 otherwise. A terminal state is absorbing (reward 0, state
      unchanged).
    """
    batch = jnp.arange(state.board.shape[0])
    legal = ttt_legal(state)[batch, action]
    placed = jnp.where(legal[:, None], state.board.at[batch, action].set(1), state.board)
    won = legal & _ttt_has_line(placed)
    illegal = ~legal & ~state.terminal
    terminal = state.terminal | won | illegal | jnp.all(placed != 0, axis=-1)
    reward = jnp.where(won, 1.0, jnp.where(illegal, -1.0, 0.0)).astype(jnp.float32)
    # Flip the view: the opponent is now to move (except in an absorbing state).
    moved = ~state.terminal
    new_state = TTTState(
        board=jnp.where(moved[:, None], -placed, state.board),
        player=jnp.where(moved, -state.player, state.player),
        terminal=terminal,
    )
    return new_state, reward, terminal


def ttt_codes(state: TTTState) -> chex.Array:
    """``[B]`` int32 ``ttt_code`` of each absolute board."""
    absolute = state.board.astype(jnp.int32) * state.player.astype(jnp.int32)[:, None]
    digits = jnp.where(absolute == -1, 2, absolute)
    return digits @ jnp.asarray(_BASE3, jnp.int32)


def ttt_hash(state: TTTState) -> chex.Array:
    """``[B, 2]`` uint32 state hash for graph search: exact, so collision-free.

    Word 0 is the board's ``ttt_code``; word 1 holds the player to move (bit 0) and
    the terminal flag (bit 1), which the board alone misses after an illegal move.
    """
    word1 = (state.player < 0).astype(jnp.uint32) | (state.terminal.astype(jnp.uint32) << 1)
    return jnp.stack([ttt_codes(state).astype(jnp.uint32), word1], axis=-1)


def _ttt_value(state: TTTState, exact_value: bool) -> chex.Array:
    """``[B]`` float32 leaf value: 0, or the exact minimax value; 0 when terminal."""
    if not exact_value:
        return jnp.zeros(state.board.shape[:1], jnp.float32)
    value = jnp.asarray(ttt_value_table())[ttt_codes(state)]
    return jnp.where(state.terminal, 0.0, value)


def ttt_root(state: TTTState, *, exact_value: bool = False,
             with_hash: bool = False) -> RootFnOutput:
    """Root of a search from ``state`` (``B`` boards).

    Uniform prior (zero logits ``[B, 9]``), value 0 (or the exact minimax value with
    ``exact_value=True``), the legal mask, and ``ttt_hash`` if ``with_hash``.
    """
    return RootFnOutput(
        prior_logits=jnp.zeros(state.board.shape, jnp.float32),
        value=_ttt_value(state, exact_value),
        embedding=state,
        legal_action_mask=ttt_legal(state),
        state_hash=ttt_hash(state) if with_hash else None,
    )


def make_ttt_recurrent_fn(*, exact_value: bool = False, with_hash: bool = False) -> RecurrentFn:
    """A tic-tac-toe ``recurrent_fn(params, rng_key, action [B], state)``.

    ``params`` and ``rng_key`` are ignored. The output has the uniform prior (zero
    logits), value 0 at non-terminal states (the exact minimax value instead with
    ``exact_value=True``, a perfect evaluator) and 0 at terminal ones, the exact
    reward and terminal flag, discount -1, the legal mask of the new state and, with
    ``with_hash``, its ``ttt_hash``.
    """

    def recurrent_fn(params: Any, rng_key: chex.PRNGKey, action: chex.Array,
                     embedding: TTTState) -> tuple[RecurrentFnOutput, TTTState]:
        del params, rng_key
        state, reward, terminal = ttt_step(embedding, action)
        out = RecurrentFnOutput(
            reward=reward,
            discount=jnp.full_like(reward, -1.0),
            prior_logits=jnp.zeros(state.board.shape, jnp.float32),
            value=_ttt_value(state, exact_value),
            legal_action_mask=ttt_legal(state),
            terminal=terminal,
            state_hash=ttt_hash(state) if with_hash else None,
        )
        return out, state

    return recurrent_fn


ttt_recurrent_fn = make_ttt_recurrent_fn()


# --------------------------------------------------------------------------------------
# Random finite games and backward induction.
# --------------------------------------------------------------------------------------


@chex.dataclass(frozen=True)
class RandomGame:
    """A finite game as arrays (a tree, or a DAG when nodes are merged); root = node 0.

    Node ids are topologically sorted: every child id is larger than its parent's.
    Pass it (NumPy or JAX arrays) as ``params`` to ``random_game_recurrent_fn``.

    Attributes:
      children: ``[N, A]`` int32 child node id, -1 where the action is illegal (every
        entry of a terminal node).
      reward: ``[N, A]`` float32 reward of the move, from the mover's view (0 where
        illegal).
      discount: ``[N, A]`` float32 discount of the move: -1 where the player to move
        changes, +1 (or gamma) where it does not.
      terminal: ``[N]`` bool.
      value: ``[N]`` float32 the leaf value the search is given (0, or a noisy
        exact value); 0 at terminal nodes.
      prior_logits: ``[N, A]`` float32 (zeros: uniform).
      depth: ``[N]`` int32 distance from the root (the shortest one in a DAG).
    """

    children: chex.Array
    reward: chex.Array
    discount: chex.Array
    terminal: chex.Array
    value: chex.Array
    prior_logits: chex.Array
    depth: chex.Array

    @property
    def num_nodes(self) -> int:
        return int(self.children.shape[0])

    @property
    def num_actions(self) -> int:
        return int(self.children.shape[1])


def random_game(
    seed: int,
    num_actions: int = 3,
    depth: int = 4,
    *,
    legal_prob: float = 0.7,
    terminal_prob: float = 0.2,
    reward_mode: str = "terminal",
    discount: float = -1.0,
    extra_turn_prob: float = 0.0,
    merge_prob: float = 0.0,
    value_noise: float | None = None,
    prior_scale: float = 0.0,
    max_nodes: int = 100_000,
) -> RandomGame:
    """A random finite game, deterministic in its arguments.

    Built breadth-first from the root. Each action of a non-terminal node is legal
    with probability ``legal_prob`` (at least one always is). A node at depth
    ``1 <= d < depth`` is terminal with probability ``terminal_prob``; every node at
    depth ``depth`` is.

    Args:
      seed: NumPy seed.
      num_actions: ``A``.
      depth: maximum depth (number of moves) of the game.
      legal_prob: probability that an action is legal.
      terminal_prob: probability that a node above the maximum depth is terminal.
      reward_mode: ``"terminal"``: outcomes in {-1, 0, +1} on the moves into terminal
        nodes, 0 elsewhere (many exact ties); ``"dense"``: every move's reward is
        uniform in [-1, 1] (ties almost never occur, so the optimal action is unique).
      discount: of every move; -1 for a two-player zero-sum game, 1 or ``gamma`` for a
        single-agent one.
      extra_turn_prob: probability that a move keeps the same player to move
        (discount +1 instead of -1; only when ``discount == -1``).
      merge_prob: probability that a move leads to an existing node of the next depth
        instead of a new one: transpositions, for graph search.
      value_noise: ``None``: value 0 everywhere; ``sigma``: the exact value plus
        ``N(0, sigma^2)`` noise at non-terminal nodes (``0.0``: a perfect evaluator).
      prior_scale: prior logits are ``prior_scale * N(0, 1)`` (0: uniform).
      max_nodes: raise ``ValueError`` rather than build a larger game.
    """
    if reward_mode not in ("terminal", "dense"):
        raise ValueError(f"unknown reward_mode {reward_mode!r}")
    rng = np.random.default_rng(seed)
    children: list[np.ndarray] = []
    rewards: list[np.ndarray] = []
    discounts: list[np.ndarray] = []
    terminal = [False]
    depths = [0]
    by_depth: dict[int, list[int]] = {0: [0]}
    node = 0
    while node < len(terminal):
        kids = np.full(num_actions, -1, np.int32)
        rew = np.zeros(num_actions, np.float32)
        disc = np.zeros(num_actions, np.float32)
        if not terminal[node]:
            legal = rng.random(num_actions) < legal_prob
            if not legal.any():
                legal[rng.integers(num_actions)] = True
            d = depths[node] + 1
            for a in np.flatnonzero(legal):
                existing = by_depth.get(d, [])
                if existing and rng.random() < merge_prob:
                    child = int(existing[rng.integers(len(existing))])
                else:
                    child = len(terminal)
                    if child >= max_nodes:
                        raise ValueError(f"game exceeds max_nodes={max_nodes}")
                    terminal.append(d >= depth or bool(rng.random() < terminal_prob))
                    depths.append(d)
                    by_depth.setdefault(d, []).append(child)
                kids[a] = child
                if reward_mode == "dense":
                    rew[a] = rng.uniform(-1.0, 1.0)
                elif terminal[child]:
                    rew[a] = rng.integers(-1, 2)
                extra_turn = discount == -1.0 and rng.random() < extra_turn_prob
                disc[a] = 1.0 if extra_turn else discount
        children.append(kids)
        rewards.append(rew)
        discounts.append(disc)
        node += 1
    n = len(terminal)
    game = RandomGame(
        children=np.stack(children),
        reward=np.stack(rewards),
        discount=np.stack(discounts),
        terminal=np.asarray(terminal, bool),
        value=np.zeros(n, np.float32),
        prior_logits=(prior_scale * rng.standard_normal((n, num_actions))).astype(np.float32),
        depth=np.asarray(depths, np.int32),
    )
    if value_noise is not None:
        exact = random_game_values(game)
        noisy = exact + value_noise * rng.standard_normal(n)
        game = game.replace(value=np.where(game.terminal, 0.0, noisy).astype(np.float32))
    return game


def random_game_qvalues(game: RandomGame) -> np.ndarray:
    """``[N, A]`` float64 exact ``Q(n, a) = r + discount * V(child)``; -inf where illegal.

    Backward induction (Zermelo 1913; von Neumann & Morgenstern 1944) in the negamax
    form: one sweep over the nodes in reverse topological (id) order.
    """
    children = np.asarray(game.children)
    legal = children >= 0
    ids = np.arange(children.shape[0])[:, None]
    if np.any(legal & (children <= ids)):
        raise ValueError("node ids are not topologically sorted")
    reward = np.asarray(game.reward, np.float64)
    discount = np.asarray(game.discount, np.float64)
    values = np.zeros(children.shape[0])
    q = np.full(children.shape, -np.inf)
    for n in range(children.shape[0] - 1, -1, -1):
        acts = np.flatnonzero(legal[n])
        if acts.size:
            q[n, acts] = reward[n, acts] + discount[n, acts] * values[children[n, acts]]
            values[n] = q[n, acts].max()
    return q


def random_game_values(game: RandomGame) -> np.ndarray:
    """``[N]`` float64 exact value of every node for its player to move; 0 if terminal."""
    q = random_game_qvalues(game)
    has_move = np.isfinite(q).any(axis=1)
    return np.where(has_move, np.max(q, axis=1, initial=-np.inf), 0.0)


def random_game_optimal_actions(game: RandomGame, node: int = 0,
                                atol: float = 1e-6) -> set[int]:
    """The actions at ``node`` whose exact Q is within ``atol`` of the best."""
    q = random_game_qvalues(game)[node]
    if not np.isfinite(q).any():
        return set()
    return {int(a) for a in np.flatnonzero(q >= q.max() - atol)}


def pad_game(game: RandomGame, num_nodes: int) -> RandomGame:
    """``game`` with unreachable terminal nodes appended up to ``num_nodes``.

    Games padded to one size share a compiled search.
    """
    extra = num_nodes - game.num_nodes
    if extra < 0:
        raise ValueError(f"game has {game.num_nodes} nodes > {num_nodes}")

    def pad(x: np.ndarray, fill: Any) -> np.ndarray:
        x = np.asarray(x)
        return np.concatenate([x, np.full((extra,) + x.shape[1:], fill, x.dtype)])

    return RandomGame(
        children=pad(game.children, -1), reward=pad(game.reward, 0),
        discount=pad(game.discount, 0), terminal=pad(game.terminal, True),
        value=pad(game.value, 0), prior_logits=pad(game.prior_logits, 0),
        depth=pad(game.depth, 0),
    )


def stack_games(games: Sequence[RandomGame]) -> tuple[RandomGame, np.ndarray]:
    """One game holding ``games`` side by side, and ``[G]`` int32 their root ids.

    For a batch whose elements play different games:
    ``random_game_root(forest, roots)``. All games must share ``num_actions``.
    """
    sizes = np.array([g.num_nodes for g in games])
    roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    children = [np.where(np.asarray(g.children) >= 0, np.asarray(g.children) + r, -1)
                for g, r in zip(games, roots, strict=True)]

    def cat(field: str) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(g, field)) for g in games])

    forest = RandomGame(
        children=np.concatenate(children).astype(np.int32), reward=cat("reward"),
        discount=cat("discount"), terminal=cat("terminal"), value=cat("value"),
        prior_logits=cat("prior_logits"), depth=cat("depth"),
    )
    return forest, roots


def random_game_hash(node: chex.Array) -> chex.Array:
    """``[B, 2]`` uint32 hash of node ids ``[B]``: exact, so transpositions are exactly
    the merged nodes (the dead state -1 maps to ``[2**32 - 1, 1]``)."""
    node = jnp.asarray(node, jnp.int32)
    return jnp.stack([node.astype(jnp.uint32), (node < 0).astype(jnp.uint32)], axis=-1)


def random_game_root(game: RandomGame, roots: int | chex.Array,
                     *, with_hash: bool = False) -> RootFnOutput:
    """Root of a search in ``game``.

    Args:
      game: the game (NumPy or JAX arrays).
      roots: a batch size ``B`` (every element starts at node 0; a Python int, so
        static under ``jit``), or ``[B]`` node ids.
      with_hash: include ``random_game_hash``.

    Returns:
      embedding = the node ids ``[B]`` int32, the game's prior logits and value, and
      the legal mask.
    """
    if isinstance(roots, int):
        roots = jnp.zeros((roots,), jnp.int32)
    node = jnp.asarray(roots, jnp.int32)
    children = jnp.asarray(game.children)[node]
    return RootFnOutput(
        prior_logits=jnp.asarray(game.prior_logits)[node],
        value=jnp.asarray(game.value)[node],
        embedding=node,
        legal_action_mask=children >= 0,
        state_hash=random_game_hash(node) if with_hash else None,
    )


def random_game_step(game: RandomGame, node: chex.Array, action: chex.Array
                     ) -> tuple[chex.Array, chex.Array, chex.Array, chex.Array]:
    """Plays ``action [B]`` at ``node [B]``.

    Returns ``(child [B], reward [B], discount [B], terminal [B])``. An illegal action
    at a non-terminal node ends the game with reward -1 for the mover; acting in a
    terminal node gives reward 0; both lead to the dead state -1, which is terminal
    and absorbing. Its discount is 1 (irrelevant: its value is 0).
    """
    node = jnp.asarray(node, jnp.int32)
    alive = node >= 0
    safe = jnp.maximum(node, 0)  # -1 would wrap around in a gather
    terminal_arr = jnp.asarray(game.terminal)
    child = jnp.where(alive, jnp.asarray(game.children)[safe, action], -1)
    moved = child >= 0
    illegal = alive & ~moved & ~terminal_arr[safe]
    reward = jnp.where(moved, jnp.asarray(game.reward)[safe, action],
                       jnp.where(illegal, -1.0, 0.0)).astype(jnp.float32)
    discount = jnp.where(moved, jnp.asarray(game.discount)[safe, action], 1.0)
    terminal = jnp.where(moved, terminal_arr[jnp.maximum(child, 0)], True)
    return child, reward, discount.astype(jnp.float32), terminal


def make_random_game_recurrent_fn(*, with_hash: bool = False) -> RecurrentFn:
    """A ``recurrent_fn(params=game, rng_key, action [B], node [B])`` for random games.

    The game is ``params`` (so games padded to one size share a compilation);
    ``rng_key`` is ignored. Outputs the game's prior logits and value at the new node
    (0 at terminal ones), its legal mask, terminal flag, and the move's reward and
    discount (see ``random_game_step``).
    """

    def recurrent_fn(params: RandomGame, rng_key: chex.PRNGKey, action: chex.Array,
                     embedding: chex.Array) -> tuple[RecurrentFnOutput, chex.Array]:
        del rng_key
        child, reward, discount, terminal = random_game_step(params, embedding, action)
        safe = jnp.maximum(child, 0)
        alive = child >= 0
        out = RecurrentFnOutput(
            reward=reward,
            discount=discount,
            prior_logits=jnp.where(alive[:, None], jnp.asarray(params.prior_logits)[safe], 0.0),
            value=jnp.where(alive & ~terminal, jnp.asarray(params.value)[safe], 0.0),
            legal_action_mask=alive[:, None] & (jnp.asarray(params.children)[safe] >= 0),
            terminal=terminal,
            state_hash=random_game_hash(child) if with_hash else None,
        )
        return out, child

    return recurrent_fn


random_game_recurrent_fn = make_random_game_recurrent_fn()
