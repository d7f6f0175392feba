"""Backgammon matches of a jaxpuct player against OpenSpiel bots, in lockstep.

pgx's ``backgammon`` (split into a decision and a chance half by
:mod:`jaxpuct.envs.pgx_backgammon`) against OpenSpiel's ``backgammon`` (Lanctot et
al. 2019), with the same dice on both sides and every move cross-checked, as
:mod:`jaxpuct.alphazero.arena` does for the deterministic games.

Moves. pgx moves one checker per step (``6 * src + die``, 156 actions; ``src`` 0
the no-op, 1 the bar, ``2 + p`` point ``p`` counted from the mover's start). An
OpenSpiel action moves up to two checkers (1352 actions: two base-26 digits, each a
point 0-23 in OpenSpiel's absolute numbering, 24 the bar or 25 a pass, plus 676
when the first checker uses the low die); a double is played as two such actions
by the same player with no roll between them (OpenSpiel's ``double_turn``). So one
OpenSpiel action is one or two pgx micro-moves: its checker moves in order
(``spiel_move_to_checker_moves``), a pass becoming pgx's no-op, which pgx must play
to end a turn in which a die cannot be used. Point ``p`` of OpenSpiel's player X
is pgx point ``p``; of player O, ``23 - p``. :func:`pgx_micro_moves` and
:func:`openspiel_action` translate (tested against ``checker_moves_to_spiel_move``).

The rules differ in one way that matters for play: OpenSpiel applies the rule that a
player must use both dice if possible (within each half of a double: OpenSpiel looks
two checker moves ahead, not four), and the larger die when only one can be used;
pgx lets any checker that can move, move. So pgx's turns are a superset of
OpenSpiel's, and the arena checks exactly that relation at every OpenSpiel move:
from pgx's own rules it enumerates every sequence of up to two micro-moves
(:func:`pgx_sequences`), keeps those of the most checker moves and, if that is one,
of the larger die (:func:`openspiel_filter`), and the resulting set of OpenSpiel
actions must equal ``legal_actions()``. The jaxpuct player moves only along
OpenSpiel's legal turns (its root's legal mask is narrowed to their micro-move
prefixes; a micro-move with one legal choice is played without asking it). Its
search plans with the same rule inside the tree
(:func:`jaxpuct.envs.pgx_backgammon.standard_legal_mask`, in JAX), and the arena
checks that mask against the narrowed one at every micro-move the agent plays.

Other checks (a failure raises :class:`jaxpuct.alphazero.arena.ArenaMismatchError`):
before every OpenSpiel move, the player to move, the board (points, bar, borne-off
checkers, from the mover's view) and the dice; after it, that pgx's turn ended
exactly when OpenSpiel is at a chance node, and that both ended the game together;
at the end, the returns. Dice: the arena draws each roll from OpenSpiel's chance
distribution (36 ordered rolls) and applies it to OpenSpiel and to pgx's chance half
(21 distinct rolls); the opening roll is pgx's (its ``init`` draws the first player
and a non-double roll), and OpenSpiel's opening outcome with the same two dice in
the same order says which OpenSpiel player that is.

Scoring. OpenSpiel's default is win/loss (1 point); the arena loads it with
``scoring_type="full_scoring"`` (gammon 2, backgammon 3), which is pgx's scoring, and
with ``max_player_turns`` raised to 100,000 (OpenSpiel 2.x ends a game after 500
turns as a draw; pgx has no limit). The one difference left: a backgammon needs the
loser to have a checker in the winner's home board or, by OpenSpiel's and the
standard rules, on the bar; pgx counts only the home board. The arena accepts pgx 2
against OpenSpiel 3 only in that exact position, counts those games, and reports
OpenSpiel's points.

``pyspiel`` and pgx are imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.alphazero.arena import (
    ArenaMismatchError,
    BotSpec,
    MatchResult,
    _score,
    make_bot,
    pure_search_rule,
)
from jaxpuct.envs import pgx_backgammon as bg
from jaxpuct.selection import TieBreak
from jaxpuct.stochastic import ChanceBackup, ChanceTies

__all__ = ["BackgammonAgent", "BackgammonResult", "OPENSPIEL_PARAMS", "check_legal_sets",
           "load_openspiel_game", "openspiel_action", "openspiel_board", "openspiel_filter",
           "pgx_micro_moves", "pgx_sequences", "play_match", "pure_search_agent",
           "random_agent", "network_search_agent", "TurnReusingSearch", "TurnView"]

NUM_ACTIONS = 156
NO_OP = 0  # pgx's no-op (any of actions 0-5)
_BAR_DIGIT, _PASS_DIGIT = 24, 25  # OpenSpiel's digits for the bar and a pass
_BAR_POS, _PASS_POS = 100, -1  # OpenSpiel's CheckerMove.pos for the bar and a pass
_LOW_DIE_FIRST = 676
OPENSPIEL_PARAMS = {"scoring_type": "full_scoring", "max_player_turns": 100_000}
_MAX_MICRO_MOVES = 20_000  # per match: far above any game (random games: under 700)
_SEED_RANGE = 2**31
_STEP = jax.jit(bg.step)  # one compile for every match
_STANDARD_MASK = jax.jit(bg.standard_legal_mask)


@dataclasses.dataclass(frozen=True)
class TurnView:
    """Where an agent's micro-move sits in the match, for an agent that keeps
    something between the micro-moves of one OpenSpiel move.

    Attributes:
      game: the game's index in the match.
      move: OpenSpiel moves and chance outcomes of that game so far (the length of
        its history): the same for every micro-move of one OpenSpiel move, and
        different for every OpenSpiel move.
      played: the agent's micro-moves already played in this OpenSpiel move, forced
        ones included.
    """

    game: int
    move: int
    played: tuple[int, ...]


# ``(keys [B], pgx states [B], legal [B, 156] bool, turn: TurnView | None) ->
# actions [B]``: ``legal`` is pgx's mask narrowed to OpenSpiel's legal turns; ``turn``
# says where the micro-move sits (an agent that keeps nothing between calls ignores it).
BackgammonAgent = Callable[[jax.Array, Any, np.ndarray, TurnView | None], Any]


def load_openspiel_game() -> Any:
    """OpenSpiel's ``backgammon`` with pgx's scoring and no turn limit
    (:data:`OPENSPIEL_PARAMS`; ``max_player_turns`` only where OpenSpiel has it)."""
    import pyspiel
    params = dict(OPENSPIEL_PARAMS)
    if "max_player_turns" not in pyspiel.load_game("backgammon").get_parameters():
        del params["max_player_turns"]
    return pyspiel.load_game("backgammon", params)


# ------------------------------------------------------------------ translation


def _pgx_src(player: int, pos: int) -> int:
    """pgx's source row (1 = bar, 2 + p = point p) of OpenSpiel ``pos`` of ``player``."""
    if pos == _BAR_POS:
        return 1
    return 2 + (pos if player == 0 else 23 - pos)


def _openspiel_digit(player: int, micro: int) -> int:
    src = micro // 6
    if src == 0:
        return _PASS_DIGIT
    if src == 1:
        return _BAR_DIGIT
    return src - 2 if player == 0 else 23 - (src - 2)


def pgx_micro_moves(os_state: Any, action: int) -> list[int]:
    """pgx's micro-moves of OpenSpiel ``action`` at ``os_state`` (its player to move):
    its checker moves in order, a pass as pgx's no-op (``0``) ending the list."""
    player = os_state.current_player()
    micro = []
    for move in os_state.spiel_move_to_checker_moves(player, int(action)):
        if move.pos == _PASS_POS:
            micro.append(NO_OP)
            break
        micro.append(6 * _pgx_src(player, move.pos) + move.num - 1)
    return micro


def openspiel_action(player: int, dice: tuple[int, int], micro: list[int] | tuple) -> int:
    """The OpenSpiel action of pgx micro-moves ``micro`` (at most two checker moves,
    no-ops ignored) by OpenSpiel ``player`` with ``dice`` (1-6): the inverse of
    :func:`pgx_micro_moves` (OpenSpiel's ``CheckerMovesToSpielMove``)."""
    moves = [m for m in micro if m // 6 != 0]
    if len(moves) > 2:
        raise ValueError(f"an OpenSpiel action holds at most two checker moves, got {micro}")
    digits = [_openspiel_digit(player, m) for m in moves] + [_PASS_DIGIT] * (2 - len(moves))
    high_first = bool(moves) and moves[0] % 6 + 1 == max(dice)
    return digits[1] * 26 + digits[0] + (0 if high_first else _LOW_DIE_FIRST)


# ------------------------------------------------------------------ pgx's turns


@jax.jit
def pgx_sequences(state: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Every sequence of up to two micro-moves pgx allows from batched ``state``, by
    pgx's own ``_update_by_action`` (its move and its next legal mask).

    Returns:
      ``(first [B, 156], stops [B, 156], second [B, 156, 156])`` bool: pgx's legal
      first micro-moves; those after which the turn or the game ends (or none but
      the no-op is left); the legal second micro-moves after each first one (rows of
      illegal first moves are ``False``).
    """

    def one(s):
        tried, valid, ends, legal = bg.try_first_moves(s)
        stop = (tried // 6 == 0) | ends | ~jnp.any(legal[:, 6:], axis=-1)
        stops = jnp.zeros((NUM_ACTIONS,), bool).at[tried].max(stop & valid)
        second = jnp.zeros((NUM_ACTIONS, NUM_ACTIONS), bool).at[tried].max(
            legal & valid[:, None])
        return s.legal_action_mask, stops, second

    return jax.vmap(one)(state)


def openspiel_filter(first: np.ndarray, stops: np.ndarray, second: np.ndarray
                     ) -> list[tuple[int, ...]]:
    """OpenSpiel's legal turns among pgx's sequences (one game's
    :func:`pgx_sequences`): the sequences with the most checker moves (2, 1 or 0:
    the pass) and, of one-move sequences, only those with the larger die
    (OpenSpiel's ``ProcessLegalMoves``; the standard rule). Returns micro-move
    tuples, a lone move or a pass ending in the no-op."""
    moves = [a for a in np.flatnonzero(first) if a // 6 != 0]
    if not moves:
        return [(NO_OP,)]
    pairs = [(a, b) for a in moves if not stops[a]
             for b in np.flatnonzero(second[a]) if b // 6 != 0]
    if pairs:
        return [(int(a), int(b)) for a, b in pairs]
    high = max(a % 6 for a in moves)
    return [(int(a), NO_OP) for a in moves if a % 6 == high]


def check_legal_sets(os_state: Any, sequences: list[tuple[int, ...]], where: str) -> None:
    """Raises :class:`ArenaMismatchError` unless pgx's filtered ``sequences`` are,
    as OpenSpiel actions, exactly ``os_state.legal_actions()``."""
    player, dice = os_state.current_player(), openspiel_dice(os_state)
    ours = sorted({openspiel_action(player, dice, s) for s in sequences})
    theirs = sorted(os_state.legal_actions())
    if ours != theirs:
        extra = [os_state.action_to_string(player, a) for a in sorted(set(ours) - set(theirs))
                 if 0 <= a < 1352]
        missing = [os_state.action_to_string(player, a)
                   for a in sorted(set(theirs) - set(ours))]
        raise ArenaMismatchError(
            f"{where}: legal turns differ: pgx (OpenSpiel's rule applied) has {len(ours)}, "
            f"OpenSpiel {len(theirs)}; only pgx: {extra[:8]}, only OpenSpiel: "
            f"{missing[:8]}\n{os_state}")


# ------------------------------------------------------------------ positions


def openspiel_dice(os_state: Any) -> tuple[int, int]:
    """The two dice (1-6, low first) of ``os_state``, from its observation tensor
    (Tesauro's encoding; the dice are its last two entries)."""
    obs = os_state.observation_tensor(os_state.current_player())
    low, high = sorted(int(round(d)) for d in obs[-2:])
    return low, high


def openspiel_board(os_state: Any) -> np.ndarray:
    """``[28]`` int pgx board of ``os_state`` from its player to move's view:
    points 0-23 from the mover's start (mover's checkers positive), the mover's bar,
    the opponent's bar (negative), the mover's and the opponent's borne-off checkers
    (the opponent's negative)."""
    me = os_state.current_player()
    you = 1 - me
    points = [(p if me == 0 else 23 - p) for p in range(24)]
    board = np.zeros(28, np.int64)
    for i, p in enumerate(points):
        board[i] = os_state.board(me, p) - os_state.board(you, p)
    obs = os_state.observation_tensor(me)  # ..., bar, score, to-move (me, then you), dice
    board[24], board[25] = os_state.board(me, _BAR_POS), -os_state.board(you, _BAR_POS)
    board[26], board[27] = int(round(obs[-7])), -int(round(obs[-4]))
    return board


def _check_position(os_state: Any, board: np.ndarray, dice: np.ndarray, os_player: int,
                    where: str) -> None:
    """Player to move, board and dice of pgx (``board [28]``, ``dice [2]`` 0-5, its
    player to move as OpenSpiel ``os_player``) against ``os_state``."""
    if os_state.is_terminal() or os_state.is_chance_node():
        raise ArenaMismatchError(f"{where}: pgx has a player to move, OpenSpiel is at a "
                                 f"{'terminal' if os_state.is_terminal() else 'chance'} "
                                 f"node\n{os_state}")
    if os_state.current_player() != os_player:
        raise ArenaMismatchError(f"{where}: OpenSpiel player {os_state.current_player()} to "
                                 f"move, pgx's player is OpenSpiel {os_player}\n{os_state}")
    theirs = openspiel_board(os_state)
    if not np.array_equal(np.asarray(board), theirs):
        raise ArenaMismatchError(f"{where}: boards differ: pgx {np.asarray(board).tolist()}, "
                                 f"OpenSpiel {theirs.tolist()}\n{os_state}")
    ours = tuple(sorted(int(d) + 1 for d in dice))
    if ours != openspiel_dice(os_state):
        raise ArenaMismatchError(f"{where}: dice differ: pgx {ours}, OpenSpiel "
                                 f"{openspiel_dice(os_state)}\n{os_state}")


def _rolls(os_game: Any) -> tuple[dict[tuple[int, int], int], list[tuple[int, int]],
                                  np.ndarray]:
    """OpenSpiel's chance outcomes, read from its action strings: ``{(die, die) in
    order: opening outcome}`` (``"... X starts, (roll: 31)"``), and for the later
    rolls each outcome's dice and probability ``[36]``."""
    state = os_game.new_initial_state()
    opening = {}
    for outcome, _ in state.chance_outcomes():
        opening[_roll_of(state.action_to_string(-1, outcome))] = outcome
    state.apply_action(state.chance_outcomes()[0][0])
    state.apply_action(state.legal_actions()[0])
    while not state.is_chance_node():  # a double's second half
        state.apply_action(state.legal_actions()[0])
    dice, probs = [], []
    for outcome, prob in state.chance_outcomes():
        dice.append(_roll_of(state.action_to_string(-1, outcome)))
        probs.append(prob)
        assert outcome == len(dice) - 1
    return opening, dice, np.asarray(probs)


def _roll_of(text: str) -> tuple[int, int]:
    """The two dice of OpenSpiel's chance-outcome string ``"... (roll: 31)"``."""
    found = re.search(r"roll: (\d)(\d)", text)
    if found is None:
        raise ArenaMismatchError(f"no roll in OpenSpiel's chance outcome {text!r}")
    return int(found.group(1)), int(found.group(2))


def _opening_outcome(opening: dict, dice: np.ndarray) -> int:
    return opening[(int(dice[0]) + 1, int(dice[1]) + 1)]


# ------------------------------------------------------------------ agents


def random_agent(seed: int = 0) -> BackgammonAgent:
    """Uniform over the legal micro-moves it is given (NumPy)."""
    rng = np.random.default_rng(seed)

    def act(keys, state, legal, turn=None):
        del keys, state, turn
        return np.array([rng.choice(np.flatnonzero(m)) for m in legal], np.int32)
    return act


def pure_search_agent(num_simulations: int, value: str = "rollouts",
                      chance_backup: ChanceBackup = "expectation", max_steps: int = 2000,
                      rules: str = "standard", selection: str = "uct",
                      uct_c: float = 2.0, reuse_within_turn: bool = False,
                      reuse_simulations: int = 0, solver: bool = False,
                      chance_ties: ChanceTies = "first", tie_break: TieBreak = "first"
                      ) -> tuple[BackgammonAgent, str]:
    """A greedy :func:`jaxpuct.stochastic_policy` over pgx backgammon
    (:mod:`jaxpuct.envs.pgx_backgammon`): no network, ``value`` ``"rollouts"``
    (one uniform random rollout per new node, as MCTSBot's evaluator) or
    ``"zero"``; no root noise; the most visited micro-move. ``rules``: the legal
    micro-moves below the root (``"standard"``, OpenSpiel's, or ``"pgx"``; the root's
    are always the arena's, OpenSpiel's). ``selection``: ``"uct"``
    (:meth:`jaxpuct.PUCTConfig.uct` with ``c = uct_c``, MCTSBot's rule; values in
    points, as MCTSBot's), ``"puct"`` (AlphaZero's rule with a uniform prior) or
    ``"gumbel"`` (:func:`jaxpuct.stochastic_gumbel_policy` without noise: sequential
    halving over every legal micro-move at the root, a rule for the best move at
    the end of the budget rather than for the visits along the way (Karnin et al.
    2013; Danihelka et al. 2022), Gumbel's deterministic rule below it; the move
    is the best completed Q among the root's most visited micro-moves).

    ``reuse_within_turn``: search once per OpenSpiel move, as MCTSBot does, instead of
    once per micro-move. The first micro-move the agent is asked for in an OpenSpiel
    move gets a search of ``num_simulations``; the next one of the same OpenSpiel
    move continues the subtree under the micro-move played (AlphaGo Zero's tree
    reuse, Silver et al. 2017, through the within-turn chance node's one outcome),
    with ``reuse_simulations`` more simulations, or, with 0, the most visited of its
    root's micro-moves. So with 0 the agent spends ``num_simulations`` rollouts per
    OpenSpiel move it searches, as ``MCTSBot(num_simulations)``. A fresh search
    replaces the reuse where the subtree's root has no visited micro-move (its
    simulations are counted). Returns a :class:`TurnReusingSearch`.

    ``solver``: the MCTS-solver alongside (:mod:`jaxpuct.solver`, as
    ``MCTSBot(solve=True)``): a move that wins 3 points, the most a game can score, is
    proven at once, and any node once all its children are (a chance node by the
    expectation over its exact dice probabilities); the move of a proven root is the
    solver's.

    ``chance_ties``: which of the equally likely rolls a chance node takes first
    (:func:`jaxpuct.stochastic_search`): ``"first"``, the lowest-index (1-2, 1-3, ...),
    ``"random"`` (drawn at every visit) or ``"shared"`` (a random order per search,
    the same at every chance node). ``tie_break``: the same at decision nodes
    (:class:`jaxpuct.PUCTConfig`): ``"first"`` tries the untried micro-moves lowest
    index first, ``"random"`` in a random order (MCTSBot shuffles them).

    Returns:
      ``(agent, description)``; the agent is jitted for the batch size it is given.
    """
    import jaxpuct
    _check_reuse(reuse_within_turn, reuse_simulations)
    root_fn, decision_fn, chance_fn = bg.make_search_fns(value, max_steps, rules)
    # Values are points: a backgammon (3) is the best a move can reach.
    proofs = jaxpuct.SolverConfig(value_bound=3.0) if solver else False
    if selection == "gumbel":
        if tie_break != "first":
            raise ValueError("tie_break is UCT's and PUCT's; the Gumbel rule has no "
                             f"untried-action ties to break, got tie_break={tie_break!r}")
        rule_words = "Gumbel root search (sequential halving over every legal micro-move"

        def policy(params, key, root, legal, simulations, tree):
            del params
            return jaxpuct.stochastic_gumbel_policy(
                None, key, root, decision_fn, chance_fn, simulations, invalid_actions=~legal,
                max_num_considered_actions=bg.NUM_ACTIONS, gumbel_scale=0.0,
                chance_backup=chance_backup, chance_ties=chance_ties, tree=tree,
                solver=proofs)
    else:
        rule, rule_words = pure_search_rule(selection, uct_c, tie_break)

        def policy(params, key, root, legal, simulations, tree):
            del params
            return jaxpuct.stochastic_policy(
                None, key, root, decision_fn, chance_fn, simulations, invalid_actions=~legal,
                dirichlet_fraction=0.0, temperature=0.0, chance_backup=chance_backup,
                chance_ties=chance_ties, selection=rule, tree=tree, solver=proofs)

    description = (f"jaxpuct pure stochastic {rule_words}, {num_simulations} simulations per "
                   f"{'OpenSpiel move' if reuse_within_turn else 'micro-move'}, "
                   f"{'one random rollout per node' if value == 'rollouts' else 'zero value'}, "
                   f"chance_backup={chance_backup}, {_ties_words(chance_ties)}{rules} rules "
                   f"in the tree{', MCTS-solver' if solver else ''}), greedy")
    agent = _search_agent(policy, lambda params, key, state: root_fn(state, key), None,
                          num_simulations, reuse_within_turn, reuse_simulations)
    return agent, description + _reuse_words(reuse_within_turn, reuse_simulations)


def _ties_words(chance_ties: str) -> str:
    # The default's descriptions stay as they were recorded before the option.
    return "" if chance_ties == "first" else f"chance_ties={chance_ties}, "


def _check_reuse(reuse_within_turn: bool, reuse_simulations: int) -> None:
    if reuse_simulations < 0 or (reuse_simulations and not reuse_within_turn):
        raise ValueError(f"reuse_simulations must be >= 0 and needs reuse_within_turn, got "
                         f"{reuse_simulations} with reuse_within_turn={reuse_within_turn}")


def _reuse_words(reuse_within_turn: bool, reuse_simulations: int) -> str:
    if not reuse_within_turn:
        return ""
    return (f"; the second micro-move of an OpenSpiel move continues the first's subtree "
            f"with {reuse_simulations} more simulations")


def _search_agent(policy: Callable, root_of: Callable, params: Any, num_simulations: int,
                  reuse_within_turn: bool, reuse_simulations: int) -> BackgammonAgent:
    """A greedy search agent: ``policy(params, key, root, legal [1, 156], simulations,
    tree) -> PolicyOutput`` over ``root_of(params, key, state)``; with
    ``reuse_within_turn`` a :class:`TurnReusingSearch` (see :func:`pure_search_agent`).
    ``params`` are the jitted functions' argument, not constants baked into them."""
    import jaxpuct
    from jaxpuct import solver as solver_lib

    @jax.jit
    def search(params, key, state, legal):
        root_key, search_key = jax.random.split(key)
        out = policy(params, search_key, root_of(params, root_key, state), legal,
                     num_simulations, None)
        return out.action, out.search_tree

    if not reuse_within_turn:
        def agent(keys, state, legal, turn=None):
            del turn
            return search(params, keys[0], state, jnp.asarray(legal))[0]
        return agent

    @jax.jit
    def reuse(params, tree, action, key, legal):
        # Within a turn the afterstate's chance node has the one outcome 0.
        path = jnp.stack([action, jnp.zeros_like(action)], axis=-1)
        sub, reused = jaxpuct.subtree_path(tree, path)
        if reuse_simulations:
            sub = policy(params, key, None, legal, reuse_simulations, sub).search_tree
        # The tree's edges are the 156 micro-moves (the 21 rolls fit in them).
        visits = sub.edge_visits[:, sub.ROOT_INDEX]
        counts = jnp.where(legal, visits, -1)
        action = jnp.argmax(counts, axis=-1)
        if sub.proof_plies is not None:  # the solver's move, as the policy's at temperature 0
            tree_legal, proven, edge_value, plies = solver_lib.root_edges(sub)
            action = solver_lib.best_child(tree_legal & legal, proven, edge_value, plies,
                                           visits, edge_value)
        return action, reused & (jnp.max(counts, axis=-1) > 0), sub

    return TurnReusingSearch(functools.partial(search, params), functools.partial(reuse, params),
                             num_simulations, reuse_simulations)


class TurnReusingSearch:
    """A :data:`BackgammonAgent` that searches once per OpenSpiel move and continues
    that tree for the move's later micro-moves (see :func:`pure_search_agent`'s
    ``reuse_within_turn``). Keeps, per game, the last search's tree until the game's
    next call.

    Attributes:
      simulations: simulations spent so far (fresh searches and continuations).
      searches: fresh searches so far.
      reused: micro-moves chosen from a continued tree so far.
      fallbacks: micro-moves that could have continued a tree but searched afresh
        (the subtree's root had no visited micro-move).
    """

    def __init__(self, search: Callable, reuse: Callable, num_simulations: int,
                 reuse_simulations: int) -> None:
        self._search, self._reuse = search, reuse
        self.num_simulations, self.reuse_simulations = num_simulations, reuse_simulations
        self._last: dict[int, tuple[int, tuple[int, ...], Any]] = {}
        self.simulations = self.searches = self.reused = self.fallbacks = 0

    def __call__(self, keys: jax.Array, state: Any, legal: np.ndarray,
                 turn: TurnView | None = None) -> jax.Array:
        """``keys [1]``, ``state`` one pgx state (``B = 1``), ``legal [1, 156]``:
        ``actions [1]``; without ``turn``, a fresh search that is kept for nothing."""
        mask = jnp.asarray(legal)
        if turn is None:
            self.searches += 1
            self.simulations += self.num_simulations
            return self._search(keys[0], state, mask)[0]
        last = self._last.pop(turn.game, None)
        if (last is not None and turn.played and last[0] == turn.move
                and last[1] == turn.played[:-1]):
            action, usable, tree = self._reuse(last[2], jnp.asarray(turn.played[-1:]),
                                               keys[0], mask)
            if bool(usable[0]):
                self.reused += 1
                self.simulations += self.reuse_simulations
                self._last[turn.game] = (turn.move, turn.played, tree)
                return action
            self.fallbacks += 1
        action, tree = self._search(keys[0], state, mask)
        self.searches += 1
        self.simulations += self.num_simulations
        self._last[turn.game] = (turn.move, turn.played, tree)
        return action


def network_search_agent(apply_fn: Callable, params: Any, num_simulations: int,
                         rules: str = "standard", value_scale: float = 3.0,
                         name: str = "a policy-value network", reuse_within_turn: bool = False,
                         reuse_simulations: int = 0, chance_ties: ChanceTies = "first"
                         ) -> tuple[BackgammonAgent, str]:
    """A greedy :func:`jaxpuct.stochastic_policy` with a network's priors and values
    (:func:`jaxpuct.envs.pgx_backgammon.make_network_search_fns`: ``apply_fn(params,
    obs [B, 34]) -> (logits [B, 156], value [B] in [-1, 1])``, ``value_scale``
    points per unit of value), the expectation backup at chance nodes, no root
    noise, the most visited micro-move; the root's legal micro-moves are the
    arena's (OpenSpiel's). ``reuse_within_turn``, ``reuse_simulations``,
    ``chance_ties``: as for :func:`pure_search_agent`.

    Returns:
      ``(agent, description)``; the agent is jitted for the batch size it is given.
    """
    import jaxpuct
    _check_reuse(reuse_within_turn, reuse_simulations)
    root_fn, decision_fn, chance_fn = bg.make_network_search_fns(apply_fn, rules, value_scale)

    def policy(params, key, root, legal, simulations, tree):
        return jaxpuct.stochastic_policy(
            params, key, root, decision_fn, chance_fn, simulations, invalid_actions=~legal,
            dirichlet_fraction=0.0, temperature=0.0, chance_backup="expectation",
            chance_ties=chance_ties, tree=tree)

    agent = _search_agent(policy, root_fn, params, num_simulations, reuse_within_turn,
                          reuse_simulations)
    description = (f"jaxpuct stochastic PUCT search with {name} ({num_simulations} "
                   f"simulations per {'OpenSpiel move' if reuse_within_turn else 'micro-move'}, "
                   f"network prior and value, "
                   f"chance_backup=expectation, {_ties_words(chance_ties)}{rules} rules in "
                   f"the tree), greedy")
    return agent, description + _reuse_words(reuse_within_turn, reuse_simulations)


# ------------------------------------------------------------------ matches


@dataclasses.dataclass(frozen=True)
class BackgammonResult:
    """A backgammon match from the jaxpuct player's view.

    Attributes:
      match: W/D/L by colour (:class:`jaxpuct.alphazero.arena.MatchResult`;
        ``plies`` counts pgx micro-moves per game).
      points: ``[G]`` the agent's points per game (OpenSpiel's full scoring: +-1, 2,
        3).
      bar_backgammons: games that OpenSpiel scored 3 and pgx 2 (the loser's checker
        on the bar; see the module docstring).
      agent_searches: micro-moves the agent was asked for (forced ones are played
        without it).
      agent_moves: OpenSpiel moves the agent made (a double counts two).
      histories: each game's OpenSpiel history, dice rolls included
        (``state.history()``): applied in order to ``new_initial_state()`` it replays
        the game to its end, so a game can be looked into.
    """

    match: MatchResult
    points: np.ndarray
    bar_backgammons: int
    agent_searches: int
    agent_moves: int = 0
    histories: tuple[tuple[int, ...], ...] = ()

    def report(self) -> str:
        return "\n".join([self.match.report(),
                          f"points per game: {float(np.mean(self.points)):+.3f} "
                          f"(gammons or backgammons in {int(np.sum(np.abs(self.points) > 1))} "
                          f"of {len(self.points)} games)"])


class _Game:
    """One game's OpenSpiel side and where it is in its current OpenSpiel move."""

    def __init__(self, os_state: Any, bot: Any, agent_os: int):
        self.os = os_state
        self.bot = bot
        self.agent_os = agent_os  # the agent's OpenSpiel player
        self.queue: list[int] = []  # the bot's micro-moves still to play in pgx
        self.turns: dict[tuple[int, ...], int] | None = None  # agent: legal turns
        self.played: list[int] = []  # agent: micro-moves of its current turn
        self.micro = 0


def play_match(agent: BackgammonAgent, bot: BotSpec, num_games: int, seed: int = 0,
               progress: Callable[[str], None] | None = None) -> BackgammonResult:
    """Plays ``num_games`` backgammon games of ``agent`` against ``bot`` in lockstep,
    the first ``num_games // 2`` with the agent moving first.

    Args:
      agent: ``(keys [B], pgx states [B], legal [B, 156], turn) -> actions [B]``
        (:data:`BackgammonAgent`), called with ``B = 1`` per game that needs a
        micro-move and that micro-move's :class:`TurnView`.
      bot: the OpenSpiel opponent; game ``g`` seeds its bot with ``seed + g``.
      num_games: ``B >= 2``.
      seed: of the pgx states, the rolls, the agent's keys and the bots.
      progress: called with a line whenever games end.

    Raises:
      ArenaMismatchError: pgx and OpenSpiel disagree (see the module docstring).
    """
    if isinstance(num_games, bool) or not isinstance(num_games, int) or num_games < 2:
        raise ValueError(f"num_games must be an int >= 2, got {num_games!r}")
    start = time.perf_counter()
    b = num_games
    os_game = load_openspiel_game()
    opening, os_dice, os_probs = _rolls(os_game)
    os_outcome_of = np.asarray([bg.outcome_of_dice(*d) for d in os_dice], np.int32)
    rng = np.random.default_rng(seed)
    key, init_key = jax.random.split(jax.random.PRNGKey(seed))
    state = bg.init(init_key, b)
    first_id = np.asarray(state.current_player)
    init_dice = np.asarray(state._dice)
    agent_first = np.arange(b) < b // 2
    agent_id = np.where(agent_first, first_id, 1 - first_id)
    games, os_first = [], np.zeros(b, np.int64)
    for g in range(b):
        os_state = os_game.new_initial_state()
        os_state.apply_action(_opening_outcome(opening, init_dice[g]))
        os_first[g] = os_state.current_player()
        agent_os = int(os_first[g] if agent_first[g] else 1 - os_first[g])
        games.append(_Game(os_state, make_bot(bot, os_game, 1 - agent_os,
                                              (seed + g) % _SEED_RANGE), agent_os))
    rewards = np.zeros((b, 2), np.float64)
    bot_seconds, searches, agent_moves, done_before = 0.0, 0, 0, 0
    for it in range(_MAX_MICRO_MOVES):
        legal, terminal, player, board, dice, new_rewards = jax.device_get(
            (state.legal_action_mask, state.terminated, state.current_player, state._board,
             state._dice, state.rewards))
        rewards += np.asarray(new_rewards)
        if progress is not None and int(terminal.sum()) > done_before:
            done_before = int(terminal.sum())
            progress(f"micro-move {it}: {done_before}/{b} games over")
        if terminal.all():
            break
        sequences = standard = None
        actions = np.zeros(b, np.int32)
        ask = []
        for g in np.flatnonzero(~terminal):
            game, where = games[g], f"backgammon game {g}, micro-move {games[g].micro}"
            os_player = int(os_first[g] if player[g] == first_id[g] else 1 - os_first[g])
            if not game.queue and not game.played:  # an OpenSpiel move begins
                _check_position(game.os, board[g], dice[g], os_player, where)
                if sequences is None:
                    sequences = jax.device_get(pgx_sequences(state))
                turns = openspiel_filter(*(x[g] for x in sequences))
                check_legal_sets(game.os, turns, where)
                if os_player == game.agent_os:
                    game.turns = {tuple(pgx_micro_moves(game.os, a)): a
                                  for a in game.os.legal_actions()}
                else:
                    tic = time.perf_counter()
                    os_action = game.bot.step(game.os)
                    bot_seconds += time.perf_counter() - tic
                    game.queue = pgx_micro_moves(game.os, os_action)
                    game.os.apply_action(os_action)
            if game.queue:
                actions[g] = game.queue.pop(0)
                if not legal[g, actions[g]]:
                    raise ArenaMismatchError(f"{where}: OpenSpiel's move plays pgx micro-move "
                                             f"{actions[g]}, illegal in pgx")
                continue
            assert game.turns is not None
            k = len(game.played)
            options = sorted({t[k] for t in game.turns
                              if len(t) > k and list(t[:k]) == game.played})
            if standard is None:
                standard = np.asarray(_STANDARD_MASK(state))
            _check_standard_mask(standard[g], options, where)
            if len(options) == 1:
                actions[g] = options[0]
            else:
                ask.append((g, options))
        for g, options in ask:
            mask = np.zeros((1, NUM_ACTIONS), bool)
            mask[0, options] = True
            key, sub = jax.random.split(key)
            one = jax.tree.map(lambda x, g=g: x[g:g + 1], state)
            turn = TurnView(int(g), len(games[g].os.history()), tuple(games[g].played))
            action = int(np.asarray(agent(sub[None], one, mask, turn))[0])
            searches += 1
            if not mask[0, action]:
                raise ArenaMismatchError(f"backgammon game {g}: the agent chose {action}, "
                                         f"not among OpenSpiel's legal turns ({options})")
            actions[g] = action
        os_rolls = rng.choice(len(os_probs), size=b, p=os_probs)
        state = _STEP(state, jnp.asarray(actions), jnp.asarray(os_outcome_of[os_rolls]))
        new_player, new_terminal = jax.device_get((state.current_player, state.terminated))
        for g in np.flatnonzero(~terminal):
            game = games[g]
            game.micro += 1
            where = f"backgammon game {g}, micro-move {game.micro}"
            turn_over = bool(new_terminal[g]) or new_player[g] != player[g]
            if game.turns is not None and not game.queue:
                game.played.append(int(actions[g]))
                key_ = tuple(game.played)
                if new_terminal[g] and key_ + (NO_OP,) in game.turns:
                    key_ = key_ + (NO_OP,)  # the move that ends the game, and its pass
                if key_ not in game.turns:
                    if turn_over:
                        raise ArenaMismatchError(f"{where}: pgx's turn ended after {key_}, "
                                                 f"not an OpenSpiel turn")
                    continue
                game.os.apply_action(game.turns[key_])
                game.turns, game.played = None, []
                agent_moves += 1
            elif game.queue:
                if new_terminal[g] and game.queue == [NO_OP]:
                    game.queue = []  # the pass after the last checker is borne off
                elif turn_over:
                    raise ArenaMismatchError(f"{where}: pgx's turn ended with OpenSpiel's "
                                             f"micro-moves {game.queue} still to play")
                else:
                    continue
            # An OpenSpiel move is complete in both engines.
            if game.os.is_terminal() != bool(new_terminal[g]):
                raise ArenaMismatchError(f"{where}: pgx terminal={bool(new_terminal[g])}, "
                                         f"OpenSpiel terminal={game.os.is_terminal()}\n{game.os}")
            if game.os.is_chance_node():
                if not turn_over or new_terminal[g]:
                    raise ArenaMismatchError(f"{where}: OpenSpiel rolls the dice, pgx's turn "
                                             f"has not ended\n{game.os}")
                game.os.apply_action(int(os_rolls[g]))
            elif turn_over and not new_terminal[g]:
                raise ArenaMismatchError(f"{where}: pgx's turn ended, OpenSpiel's player "
                                         f"{game.os.current_player()} moves again\n{game.os}")
    else:
        raise ArenaMismatchError(f"backgammon: games still running after {_MAX_MICRO_MOVES} "
                                 "micro-moves")
    points, bar_backgammons = _check_outcomes([g.os for g in games], rewards, first_id,
                                              os_first, agent_id)
    outcome = np.sign(points)
    plies = np.asarray([g.micro for g in games])
    # The games' records are OpenSpiel's histories (``BackgammonResult.histories``):
    # a pgx micro-move is not a move of the game as OpenSpiel and its users count them.
    match = MatchResult(game="backgammon", first=_score(outcome[agent_first]),
                        second=_score(outcome[~agent_first]), total=_score(outcome),
                        plies=plies, seconds=time.perf_counter() - start,
                        bot_seconds=bot_seconds, agent_first=agent_first,
                        outcome=outcome.astype(np.int32))
    return BackgammonResult(match=match, points=points, bar_backgammons=bar_backgammons,
                            agent_searches=searches, agent_moves=agent_moves,
                            histories=tuple(tuple(int(a) for a in g.os.history())
                                            for g in games))


def _check_standard_mask(mask: np.ndarray, options: list[int], where: str) -> None:
    """Raises :class:`ArenaMismatchError` unless ``mask [156]``
    (:func:`jaxpuct.envs.pgx_backgammon.standard_legal_mask`, the agent's rules inside
    its tree) allows exactly the micro-moves ``options`` that continue OpenSpiel's
    legal turns (any no-op action stands for the no-op)."""
    allowed = {int(a) if a // 6 else NO_OP for a in np.flatnonzero(mask)}
    if allowed != set(options):
        raise ArenaMismatchError(f"{where}: the standard rule's micro-moves {sorted(allowed)} "
                                 f"differ from OpenSpiel's {options}")


def _check_outcomes(os_states: list, rewards: np.ndarray, first_id: np.ndarray,
                    os_first: np.ndarray, agent_id: np.ndarray) -> tuple[np.ndarray, int]:
    """The agent's points per game ``[B]`` (OpenSpiel's) and the number of games
    scored 3 by OpenSpiel and 2 by pgx, after checking every game's returns."""
    points = np.zeros(len(os_states))
    bar_backgammons = 0
    for g, os_state in enumerate(os_states):
        if not os_state.is_terminal():
            raise ArenaMismatchError(f"backgammon game {g}: pgx ended, OpenSpiel did not\n"
                                     f"{os_state}")
        returns = os_state.returns()
        for pgx_id in (0, 1):
            os_player = int(os_first[g] if pgx_id == first_id[g] else 1 - os_first[g])
            ours, theirs = rewards[g, pgx_id], returns[os_player]
            if ours == theirs:
                continue
            if abs(theirs) == 3 and abs(ours) == 2 and np.sign(ours) == np.sign(theirs) \
                    and _backgammon_from_bar(os_state, loser=os_player if theirs < 0
                                             else 1 - os_player):
                continue
            raise ArenaMismatchError(
                f"backgammon game {g}: results differ: OpenSpiel returns {returns} (player "
                f"{os_first[g]} moved first), pgx rewards by id {rewards[g].tolist()} (id "
                f"{first_id[g]} moved first)\n{os_state}")
        bar_backgammons += int(abs(returns[0]) == 3 and abs(rewards[g, 0]) == 2)
        agent_os = int(os_first[g] if agent_id[g] == first_id[g] else 1 - os_first[g])
        points[g] = returns[agent_os]
    return points, bar_backgammons


def _backgammon_from_bar(os_state: Any, loser: int) -> bool:
    """The loser of a finished game has a checker on the bar, none borne off and none
    in the winner's home board (a backgammon for OpenSpiel, a gammon for pgx)."""
    winner_home = range(18, 24) if loser == 1 else range(0, 6)
    return (os_state.board(loser, _BAR_POS) > 0
            and all(os_state.board(loser, p) == 0 for p in winner_home))
