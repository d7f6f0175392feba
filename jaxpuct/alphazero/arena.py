"""Matches of a jaxpuct player against OpenSpiel bots, in lockstep.

The jaxpuct side (a trained network with search, or a pure search) plays ``B``
games at once: one jitted search over the batch of pgx states per ply. The
OpenSpiel side (Lanctot et al. 2019, "OpenSpiel: A Framework for Reinforcement
Learning in Games") keeps one ``pyspiel`` state per game, in step with the pgx
state, and its bots move per game in Python: ``pyspiel.MCTSBot`` (UCT,
Kocsis & Szepesvari 2006, with random-rollout leaf values and, with ``solve``, the
MCTS-Solver's proven values of Winands et al. 2008) or a uniform random bot.

Actions. pgx and OpenSpiel number the actions of the three games the same way
(checked cell by cell against OpenSpiel's action names in the tests):

* ``tic_tac_toe``: ``3 * row + column``, row 0 at the top;
* ``connect_four``: the column, 0 at the left;
* ``othello``: ``8 * row + column`` from a1 (row 0 is rank 1, column 0 is file a),
  and 64 is the pass.

Othello's end differs: OpenSpiel ends the game as soon as neither player can move;
pgx ends it only on a second pass in a row (or a full board, or a colour wiped
out). So where OpenSpiel has ended and pgx has not, pgx must have the pass as its
only legal move, and the arena plays it (twice at most) without asking anyone.

Cross-checks, per game and ply (a failure raises :class:`ArenaMismatchError`):
the player to move, pgx's legal mask against ``legal_actions()``, and at the end
that both have ended with the same returns. Colours: pgx draws which player id
moves first; OpenSpiel's player 0 always does, so OpenSpiel player
``0 if id == first_id else 1`` is pgx player ``id``.

``pyspiel`` is imported inside the functions, so ``import jaxpuct`` (and this
module) never needs OpenSpiel (``pip install 'jaxpuct[openspiel]'``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.alphazero.config import MAX_MOVES
from jaxpuct.alphazero.scores import MatchScore, match_score
from jaxpuct.selection import PUCTConfig, TieBreak

__all__ = ["ARENA_GAMES", "Agent", "ArenaMismatchError", "BotSpec", "MatchResult",
           "check_same_position", "ensemble_members", "greedy_search", "make_bot",
           "network_agent", "openspiel_action", "pgx_action", "play_match",
           "pure_search_agent", "pure_search_rule", "restore_network", "split_run_dirs"]

ARENA_GAMES: tuple[str, ...] = ("tic_tac_toe", "connect_four", "othello")
# OpenSpiel's name of each pgx game (the same three names).
_OPENSPIEL_NAMES = {"tic_tac_toe": "tic_tac_toe", "connect_four": "connect_four",
                    "othello": "othello"}
# The pass action where a game has one (the same number in pgx and OpenSpiel).
_PASS_ACTION = {"othello": 64}
# The most passes pgx plays after OpenSpiel has ended a game (othello: one per
# player, the second ends the game).
_MAX_FORCED_PASSES = 2

_SEED_RANGE = 2**31
# ``(keys [B], pgx states [B]) -> actions [B]`` int32.
Agent = Callable[[jax.Array, Any], jax.Array]


class ArenaMismatchError(RuntimeError):
    """pgx and OpenSpiel disagree about a game (legal moves, end or result)."""


def _check_game(game: str) -> None:
    if game not in ARENA_GAMES:
        raise ValueError(f"game must be one of {', '.join(ARENA_GAMES)}, got {game!r}")


def openspiel_action(game: str, action: int) -> int:
    """The OpenSpiel action of pgx ``action`` in ``game`` (the same number: see the
    module docstring)."""
    _check_game(game)
    return int(action)


def pgx_action(game: str, action: int) -> int:
    """The pgx action of OpenSpiel ``action`` in ``game`` (inverse of
    :func:`openspiel_action`)."""
    _check_game(game)
    return int(action)


def check_same_position(game: str, legal: np.ndarray, terminal: bool, os_state: Any,
                        where: str) -> None:
    """Raises :class:`ArenaMismatchError` unless pgx's ``legal [A]`` mask and
    ``terminal`` flag agree with OpenSpiel's ``os_state`` (live games only: a pgx
    othello game OpenSpiel has ended is the caller's business). ``where`` names the
    game and ply in the message."""
    if bool(terminal) != os_state.is_terminal():
        raise ArenaMismatchError(f"{where}: pgx terminal={bool(terminal)}, OpenSpiel "
                                 f"terminal={os_state.is_terminal()}\n{os_state}")
    if terminal:
        return
    ours = sorted(openspiel_action(game, int(a)) for a in np.flatnonzero(legal))
    theirs = sorted(os_state.legal_actions())
    if ours != theirs:
        raise ArenaMismatchError(f"{where}: legal actions differ: pgx (as OpenSpiel "
                                 f"actions) {ours}, OpenSpiel {theirs}\n{os_state}")


@dataclasses.dataclass(frozen=True)
class BotSpec:
    """An OpenSpiel opponent.

    Attributes:
      kind: ``"mcts"`` (``pyspiel.MCTSBot``) or ``"random"`` (uniform over the
        legal moves).
      simulations: MCTSBot's simulations per move.
      uct_c: MCTSBot's UCT exploration constant (OpenSpiel's default 2).
      rollouts: random rollouts per leaf of MCTSBot's ``RandomRolloutEvaluator``.
      solve: MCTSBot backs up proven wins and losses (MCTS-Solver).
      max_memory_mb: MCTSBot's tree memory limit.
    """

    kind: str = "mcts"
    simulations: int = 1000
    uct_c: float = 2.0
    rollouts: int = 1
    solve: bool = True
    max_memory_mb: int = 1000

    def __post_init__(self):
        if self.kind not in ("mcts", "random"):
            raise ValueError(f"kind must be 'mcts' or 'random', got {self.kind!r}")
        for name in ("simulations", "rollouts", "max_memory_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not self.uct_c > 0:
            raise ValueError(f"uct_c must be > 0, got {self.uct_c!r}")

    def describe(self) -> str:
        if self.kind == "random":
            return "OpenSpiel uniform random bot"
        return (f"OpenSpiel MCTSBot ({self.simulations} simulations, UCT c={self.uct_c:g}, "
                f"{self.rollouts} random rollout(s) per leaf, solve={self.solve})")


def make_bot(spec: BotSpec, os_game: Any, player: int, seed: int) -> Any:
    """A ``pyspiel.Bot`` of ``spec`` for OpenSpiel ``player`` of ``os_game``."""
    import pyspiel
    if spec.kind == "random":
        return pyspiel.make_uniform_random_bot(player, seed)
    evaluator = pyspiel.RandomRolloutEvaluator(spec.rollouts, seed)
    return pyspiel.MCTSBot(os_game, evaluator, spec.uct_c, spec.simulations,
                           spec.max_memory_mb, spec.solve, seed, False)


def greedy_search(fns: Any, root_stats: bool = False) -> Callable:
    """The jitted greedy player of ``fns`` (a ``selfplay.SearchFns``):
    ``(params, keys [B], state [B]) -> actions [B]``, no root noise, the most
    visited move. With ``root_stats``: ``(actions [B], visit_counts [B, A],
    qvalues [B, A])``, the root's statistics that chose the move
    (:meth:`jaxpuct.Tree.summary`), for a reader who wants to see how close it was."""
    from jaxpuct.alphazero import selfplay

    def act(params, keys, state):
        temperature = jnp.zeros((keys.shape[0],), jnp.float32)
        out = selfplay.search(fns, params, keys, state, dirichlet_fraction=0.0,
                              temperature=temperature)
        if not root_stats:
            return out.action
        summary = out.search_tree.summary()
        return out.action, summary.visit_counts, summary.qvalues
    return jax.jit(act)


def root_record(visit_counts: Any, qvalues: Any) -> dict[str, list]:
    """One root of :func:`greedy_search` with ``root_stats`` as a game record keeps
    it: ``{"visits": [A] ints, "q": [A] floats to 4 decimals}`` from one row's
    ``visit_counts [A]`` and ``qvalues [A]``."""
    return {"visits": [int(v) for v in np.asarray(visit_counts)],
            "q": [round(float(q), 4) for q in np.asarray(qvalues)]}


def _check_run_dir(run_dir: str, what: str = "--run-dir") -> None:
    """Said here rather than by ``load_config``, whose hint is about resuming a run."""
    from jaxpuct.alphazero.checkpoints import CheckpointError
    if not os.path.isdir(run_dir):
        raise CheckpointError(
            f"{what} {run_dir!r} does not exist; expected the run directory of a "
            f"training run (python -m examples.selfplay --run-dir ...) or an exported "
            f"network's (python -m examples.export_network --out ...)")
    if not os.path.isfile(os.path.join(run_dir, "config.json")):
        raise CheckpointError(
            f"{what} {run_dir!r} holds no training run (no config.json: no checkpoint "
            f"was saved there); expected the run directory of python -m examples.selfplay")


# The fields that fix a run's network: runs that agree on them can be averaged.
_NETWORK_FIELDS = ("game", "network", "hidden", "blocks", "channels")


def split_run_dirs(text: str) -> list[str]:
    """A command line's run directories separated by commas, blanks around them
    dropped (``"R1, R2,"`` -> ``["R1", "R2"]``)."""
    return [d.strip() for d in text.split(",") if d.strip()]


def ensemble_members(run_dirs: Sequence[str], config: Any) -> list[tuple[str, int, Any]]:
    """Checkpoints of runs of ``config``'s network, to average with it
    (:mod:`jaxpuct.envs.ensemble`): each member's newest, or ``RUN_DIR@STEP`` for
    checkpoint ``STEP`` (an earlier checkpoint of the same run: a snapshot
    ensemble, Huang et al. 2017, "Snapshot ensembles: train 1, get M for free").

    Args:
      run_dirs: run directories of ``examples/selfplay.py``, each optionally
        followed by ``@STEP``.
      config: the ``SelfPlayConfig`` of the run they join.

    Returns:
      ``[(run_dir, iteration, params)]``, in the order given.

    Raises:
      ValueError: a run of another network (the differing fields are named), or a
        step that is not a number.
      CheckpointError: a directory that holds no run, no intact checkpoint, or not
        the named one.
    """
    from jaxpuct.alphazero import checkpoints
    from jaxpuct.alphazero.trainer import Trainer
    out = []
    for member in run_dirs:
        run_dir, step = _member_step(member)
        _check_run_dir(run_dir, "ensemble member")
        other = checkpoints.load_config(run_dir)
        differ = [f"{f} {getattr(other, f)!r} against {getattr(config, f)!r}"
                  for f in _NETWORK_FIELDS if getattr(other, f) != getattr(config, f)]
        if differ:
            raise ValueError(f"ensemble member {run_dir!r} has another network: "
                             f"{'; '.join(differ)}")
        iteration, params = restore_network(
            run_dir, Trainer(other, devices=jax.devices()[:1]), step)
        out.append((run_dir, iteration, params))
    return out


def restore_network(run_dir: str, trainer: Any, step: int | None = None) -> tuple[int, Any]:
    """The network of a run: ``(iteration, params)``.

    Args:
      run_dir: a run directory of ``examples/selfplay.py`` (its checkpoint ``step``,
        default the newest intact one), or a directory a network was exported to
        (:func:`jaxpuct.alphazero.checkpoints.save_network`; ``python -m
        examples.export_network``), which holds one iteration.
      trainer: a ``Trainer`` of the run's config (its structure is read into).
      step: the checkpoint; for an export, ``None`` or its iteration.

    Raises:
      CheckpointError: no such checkpoint or export, or one that fails its checks;
        a ``step`` an export does not hold.
    """
    from jaxpuct.alphazero import checkpoints
    if checkpoints.is_network_dir(run_dir):
        # Only the parameters' structure: no buffer is allocated.
        template = jax.eval_shape(trainer.init).params
        iteration, params = checkpoints.load_network(run_dir, template)
        if step is not None and step != iteration:
            raise checkpoints.CheckpointError(
                f"{run_dir!r} exports the network of iteration {iteration}, not {step}")
        return iteration, params
    ts = checkpoints.restore_checkpoint(run_dir, trainer.init(), trainer.config, step=step)
    return int(ts.iteration), ts.params


def _member_step(member: str) -> tuple[str, int | None]:
    """``"R@800"`` -> ``("R", 800)``; ``"R"`` -> ``("R", None)``."""
    run_dir, sep, step = member.rpartition("@")
    if not sep:
        return member, None
    if not step.isdigit():
        raise ValueError(f"ensemble member {member!r}: expected RUN_DIR or RUN_DIR@STEP with "
                         f"STEP a checkpoint number, got step {step!r}")
    return run_dir, int(step)


def network_agent(run_dir: str, step: int | None = None,
                  num_simulations: int | None = None,
                  solver: bool | None = None,
                  symmetry: str | None = None,
                  ensemble: Sequence[str] = (),
                  graph_search: bool | None = None,
                  root_stats: bool = False) -> tuple[Agent, str, str]:
    """The greedy agent of a training run (``examples/selfplay.py``'s ``--run-dir``):
    its search with the network of checkpoint ``step`` (default: the newest intact
    one), no root noise, the most visited move.

    Args:
      run_dir: the run directory, or an exported network's
        (:func:`restore_network`).
      step: the checkpoint.
      num_simulations: per move (default: the run's).
      solver: search with the MCTS-solver or without it (default: as the run
        trained, ``SelfPlayConfig.solver``).
      symmetry: the network under the board's symmetries, ``"none"``,
        ``"random"`` or ``"average"`` (default: as the run trained,
        ``SelfPlayConfig.search_symmetry``).
      ensemble: other runs of the same network (:func:`ensemble_members`) whose
        newest checkpoints join this one: the search evaluates the mean of their
        probabilities and values (:func:`jaxpuct.envs.ensemble.ensemble_apply`;
        under ``symmetry="average"``, the mean over both).
      graph_search: search as a graph, transpositions sharing a node, or as a tree
        (default: as the run trained, ``SelfPlayConfig.graph_search``).
      root_stats: the agent returns ``(actions [B], visit_counts [B, A], qvalues
        [B, A])`` instead of the actions (:func:`greedy_search`).

    Returns:
      ``(agent, game, description)``.
    """
    from jaxpuct.alphazero import checkpoints, selfplay
    from jaxpuct.alphazero.trainer import Trainer
    from jaxpuct.envs import ensemble as ensembles
    _check_run_dir(run_dir)
    config = checkpoints.load_config(run_dir)
    trainer = Trainer(config, devices=jax.devices()[:1])
    iteration, params = restore_network(run_dir, trainer, step)
    members = ensemble_members(ensemble, config)
    n = config.num_simulations if num_simulations is None else num_simulations
    solve = config.solver if solver is None else solver
    sym = config.search_symmetry if symmetry is None else symmetry
    graph = config.graph_search if graph_search is None else graph_search
    # replace() validates the name (ValueError naming the accepted ones).
    played = dataclasses.replace(config, num_simulations=n, solver=solve, search_symmetry=sym,
                                 graph_search=graph)
    apply_fn = trainer.apply_fn
    if members:
        apply_fn = ensembles.ensemble_apply(apply_fn)
        params = ensembles.stack_params([params] + [p for _, _, p in members])
    fns = selfplay.make_search_fns(played, trainer.env, apply_fn, trainer.game.num_actions)
    act = greedy_search(fns, root_stats=root_stats)
    description = (f"jaxpuct network of {run_dir} at iteration {iteration}"
                   + "".join(f" averaged with {d} at iteration {i}" for d, i, _ in members)
                   + f", {n} simulations{', MCTS-solver' if solve else ''}"
                   f"{', graph search' if graph else ''}"
                   f"{'' if sym == 'none' else f', symmetries: {sym}'}, greedy")
    return (lambda keys, state: act(params, keys, state)), config.game, description


def pure_search_rule(selection: str, uct_c: float = 2.0,
                     tie_break: TieBreak = "first") -> tuple[PUCTConfig, str]:
    """A pure search's selection rule and its words for a description:
    ``"uct"`` gives :meth:`jaxpuct.PUCTConfig.uct` with ``c = uct_c``, ``"puct"``
    AlphaZero's default rule (which, with a uniform prior, explores too little);
    ``tie_break`` (:class:`jaxpuct.PUCTConfig`) for either: ``"random"`` tries
    unvisited actions in a random order, as MCTSBot, where ``"first"`` takes the
    lowest index.

    Raises:
      ValueError: another ``selection``.
    """
    # The default's words stay as they were recorded before the option.
    ties = "" if tie_break == "first" else f", ties {tie_break}"
    if selection == "uct":
        return PUCTConfig.uct(uct_c, tie_break), f"UCT search (c = {uct_c:g}{ties}"
    if selection == "puct":
        return PUCTConfig(tie_break=tie_break), f"PUCT search (uniform prior{ties}"
    raise ValueError(f"selection must be 'uct' or 'puct', got {selection!r}")


def pure_search_agent(game: str, num_simulations: int, value: str = "zero",
                      solver: bool = False, selection: str = "uct",
                      uct_c: float = 2.0, tie_break: TieBreak = "first",
                      root_stats: bool = False) -> tuple[Agent, str]:
    """A greedy search without a network and, at each new leaf, ``value``
    ``"zero"`` (only terminal rewards inform it) or ``"rollouts"`` (the outcome of one
    uniform random rollout to the end of the game, :mod:`jaxpuct.envs.rollouts` with
    ``mix = 1``, as MCTSBot's evaluator); with ``solver``, the MCTS-solver too (as
    ``MCTSBot(solve=True)``).

    ``selection``: ``"uct"`` (:meth:`jaxpuct.PUCTConfig.uct` with ``c = uct_c``,
    MCTSBot's rule: every move tried once, then ``Q + c sqrt(log N / n)``; the
    untried ones lowest index first, or with ``tie_break="random"`` in a random order
    as MCTSBot's) or
    ``"puct"`` (AlphaZero's rule with a uniform prior, made to follow a network's
    prior: with none it explores too little; in connect four at equal simulations,
    100 and 1,000, it scored 0.25 and 0.36 against MCTSBot where UCT scored 0.40 and
    0.49, over 256 games each; docs/arena.md).

    ``root_stats``: the agent returns ``(actions [B], visit_counts [B, A], qvalues
    [B, A])``, as :func:`greedy_search`'s.

    Returns:
      ``(agent, description)``.
    """
    from jaxpuct.alphazero import selfplay
    from jaxpuct.alphazero.config import SelfPlayConfig
    from jaxpuct.envs import rollouts
    from jaxpuct.envs.pgx_games import make_pgx_game, rollout_rules
    from jaxpuct.testing.pure_search import zero_apply
    _check_game(game)
    if value not in ("zero", "rollouts"):
        raise ValueError(f"value must be 'zero' or 'rollouts', got {value!r}")
    rule, rule_words = pure_search_rule(selection, uct_c, tie_break)
    pgx_game = make_pgx_game(game)
    # batch_size 1: only the search fields matter here (the buffer is never built).
    config = SelfPlayConfig(game=game, num_simulations=num_simulations, batch_size=1,
                            solver=solver)
    fns = dataclasses.replace(selfplay.make_search_fns(
        config, pgx_game.environment, None, pgx_game.num_actions), selection=rule)
    if value == "rollouts":
        # The game's cheapest rules play the rollouts (connect four's test only the
        # lines through the new stone): the same values, bit for bit, faster.
        fns = dataclasses.replace(fns, recurrent_fn=rollouts.make_recurrent_fn(
            zero_apply(pgx_game.num_actions), pgx_game.environment, mix=1.0,
            max_steps=MAX_MOVES[game], **rollout_rules(game)))
    act = greedy_search(fns, root_stats=root_stats)
    description = (f"jaxpuct pure {rule_words}, {num_simulations} simulations, "
                   f"{'one random rollout per leaf' if value == 'rollouts' else 'zero value'}"
                   f"{', MCTS-solver' if solver else ''}), greedy")
    return (lambda keys, state: act(None, keys, state)), description


@dataclasses.dataclass(frozen=True)
class MatchResult:
    """A match from the jaxpuct player's view.

    Attributes:
      game: the game.
      first, second: :class:`MatchScore` of the games where jaxpuct moved first /
        second.
      total: both colours together.
      plies: ``[G]`` plies of each game (pgx's, forced passes included).
      seconds: wall time of the match; bot_seconds: of it, in the OpenSpiel bots.
      moves: each game's pgx actions in the order played (forced passes
        included), so that a game can be replayed and looked into.
      agent_first: ``[G]`` bool, the games where jaxpuct moved first.
      outcome: ``[G]`` jaxpuct's result of each game, +1, 0 or -1.
      roots: empty, or (when the agent returns its root's statistics) for each game
        one entry per move of ``moves``: ``{"visits": [A], "q": [A]}`` for the
        agent's moves, the root that chose them, and ``None`` for the bot's moves
        and forced passes.
    """

    game: str
    first: MatchScore
    second: MatchScore
    total: MatchScore
    plies: np.ndarray
    seconds: float
    bot_seconds: float
    moves: tuple[tuple[int, ...], ...] = ()
    agent_first: np.ndarray | None = None
    outcome: np.ndarray | None = None
    roots: tuple[tuple[dict | None, ...], ...] = ()

    def report(self) -> str:
        return "\n".join([f"jaxpuct as first player:  {self.first.summary()}",
                          f"jaxpuct as second player: {self.second.summary()}",
                          f"both colours ({self.total.games} games): {self.total.summary()}"])


def _score(outcome: np.ndarray) -> MatchScore:
    return match_score(int(np.sum(outcome > 0)), int(np.sum(outcome == 0)),
                       int(np.sum(outcome < 0)))


def play_match(agent: Agent, game: str, bot: BotSpec, num_games: int, seed: int = 0,
               progress: Callable[[str], None] | None = None) -> MatchResult:
    """Plays ``num_games`` games of ``agent`` against ``bot``, all in lockstep; the
    first ``num_games // 2`` with the agent moving first.

    Args:
      agent: ``(keys [B], pgx states [B]) -> actions [B]`` (jitted; see
        :func:`network_agent`, :func:`pure_search_agent`), or ``-> (actions [B],
        visit_counts [B, A], qvalues [B, A])`` (``network_agent(...,
        root_stats=True)``): then the result's ``roots`` keep each of its moves'
        root.
      game: one of :data:`ARENA_GAMES`.
      bot: the OpenSpiel opponent; game ``g`` seeds its bot with ``seed + g``
        (modulo ``2**31``).
      num_games: ``B >= 2``.
      seed: of the pgx states, the agent's keys and the bots.
      progress: called with a line whenever games end.

    Raises:
      ArenaMismatchError: pgx and OpenSpiel disagree (see the module docstring).
    """
    import pyspiel

    from jaxpuct.envs.pgx_games import make_pgx_game
    _check_game(game)
    if isinstance(num_games, bool) or not isinstance(num_games, int) or num_games < 2:
        raise ValueError(f"num_games must be an int >= 2, got {num_games!r}")
    start = time.perf_counter()
    b = num_games
    pgx_game = make_pgx_game(game)
    env_step = jax.jit(pgx_game.environment.step)
    os_game = pyspiel.load_game(_OPENSPIEL_NAMES[game])
    rng, init_key = jax.random.split(jax.random.PRNGKey(seed))
    state = jax.jit(pgx_game.init, static_argnums=1)(init_key, b)
    first_id = np.asarray(state.current_player)
    agent_first = np.arange(b) < b // 2
    agent_id = np.where(agent_first, first_id, 1 - first_id)
    # OpenSpiel's seeds are C++ ints: keep them in [0, 2**31).
    bots = [make_bot(bot, os_game, int(agent_first[g]), (seed + g) % _SEED_RANGE)
            for g in range(b)]
    os_states = [os_game.new_initial_state() for _ in range(b)]
    rewards = np.zeros((b, 2), np.float32)  # summed pgx rewards, by player id
    plies = np.zeros(b, np.int64)
    forced = np.zeros(b, np.int64)
    moves: list[list[int]] = [[] for _ in range(b)]
    roots: list[list[dict | None]] = [[] for _ in range(b)]
    with_roots = False
    bot_seconds, done_before = 0.0, 0
    max_plies = MAX_MOVES[game] + _MAX_FORCED_PASSES + 1
    for ply in range(max_plies):
        legal, terminal, player, new_rewards = jax.device_get(
            (state.legal_action_mask, pgx_game.environment.terminal(state),
             state.current_player, state.rewards))
        rewards += np.asarray(new_rewards, np.float32)
        if progress is not None and int(terminal.sum()) > done_before:
            done_before = int(terminal.sum())
            progress(f"ply {ply}: {done_before}/{b} games over")
        if terminal.all():
            break
        rng, key = jax.random.split(rng)
        agent_to_move = ~terminal & (player == agent_id)
        agent_actions = root_visits = root_q = None
        if agent_to_move.any():
            out = agent(jax.random.split(key, b), state)
            if isinstance(out, tuple):
                agent_actions, root_visits, root_q = map(np.asarray, out)
                with_roots = True
            else:
                agent_actions = np.asarray(out)
        actions = np.zeros(b, np.int32)
        for g in np.flatnonzero(~terminal):
            os_state, where = os_states[g], f"{game} game {g}, ply {ply}"
            if os_state.is_terminal():
                actions[g] = _forced_pass(game, legal[g], forced[g], where)
                forced[g] += 1
                moves[g].append(int(actions[g]))
                roots[g].append(None)
                continue
            check_same_position(game, legal[g], False, os_state, where)
            os_player = 0 if player[g] == first_id[g] else 1
            if os_state.current_player() != os_player:
                raise ArenaMismatchError(f"{where}: OpenSpiel player {os_state.current_player()}"
                                         f" to move, pgx player id {player[g]} (= OpenSpiel "
                                         f"{os_player})")
            root = None
            if agent_to_move[g] and agent_actions is not None:
                action = int(agent_actions[g])
                if not 0 <= action < legal.shape[1] or not legal[g, action]:
                    raise ArenaMismatchError(f"{where}: the agent chose illegal {action}")
                if root_visits is not None and root_q is not None:
                    root = root_record(root_visits[g], root_q[g])
            else:
                tic = time.perf_counter()
                action = pgx_action(game, bots[g].step(os_state))
                bot_seconds += time.perf_counter() - tic
            os_state.apply_action(openspiel_action(game, action))
            actions[g] = action
            moves[g].append(action)
            roots[g].append(root)
            plies[g] += 1
        state = env_step(state, jnp.asarray(actions))
    else:
        raise ArenaMismatchError(f"{game}: games still running after {max_plies} plies")
    outcome = _check_outcomes(os_states, rewards, first_id, agent_id, game)
    return MatchResult(game=game, first=_score(outcome[agent_first]),
                       second=_score(outcome[~agent_first]), total=_score(outcome),
                       plies=plies + forced, seconds=time.perf_counter() - start,
                       bot_seconds=bot_seconds, moves=tuple(map(tuple, moves)),
                       agent_first=agent_first, outcome=outcome,
                       roots=tuple(map(tuple, roots)) if with_roots else ())


def _forced_pass(game: str, legal: np.ndarray, passes_so_far: int, where: str) -> int:
    """The pass pgx must play in a game OpenSpiel has ended (othello only)."""
    pass_action = _PASS_ACTION.get(game)
    if (pass_action is None or passes_so_far >= _MAX_FORCED_PASSES
            or np.flatnonzero(legal).tolist() != [pass_action]):
        raise ArenaMismatchError(f"{where}: OpenSpiel has ended the game, pgx has not and "
                                 f"its legal actions are {np.flatnonzero(legal).tolist()}")
    return pass_action


def _check_outcomes(os_states: list, rewards: np.ndarray, first_id: np.ndarray,
                    agent_id: np.ndarray, game: str) -> np.ndarray:
    """``[B]`` the agent's result (+1, 0, -1), after checking that OpenSpiel's returns
    equal pgx's summed rewards for both players of every game."""
    outcome = np.zeros(len(os_states), np.float32)
    for g, os_state in enumerate(os_states):
        if not os_state.is_terminal():
            raise ArenaMismatchError(f"{game} game {g}: pgx ended, OpenSpiel did not\n"
                                     f"{os_state}")
        returns = os_state.returns()
        for pgx_id in (0, 1):
            os_player = 0 if pgx_id == first_id[g] else 1
            if not np.isclose(returns[os_player], rewards[g, pgx_id]):
                raise ArenaMismatchError(
                    f"{game} game {g}: results differ: OpenSpiel returns {returns} (player 0 "
                    f"moved first), pgx rewards by id {rewards[g].tolist()} (id "
                    f"{first_id[g]} moved first)\n{os_state}")
        outcome[g] = rewards[g, agent_id[g]]
    return outcome
