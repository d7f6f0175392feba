"""A jaxpuct player against OpenSpiel's MCTSBot or random bot (tic_tac_toe,
connect_four, othello).

    # a trained run (examples/selfplay.py's --run-dir) against MCTSBot, 1000 simulations
    python -m examples.arena --run-dir runs/c4 --opponent mcts --opponent-simulations 1000

    # a pure search with random rollouts against MCTSBot, both with 100 simulations
    python -m examples.arena --game connect_four --value rollouts --simulations 100 \\
        --opponent-simulations 100 --games 64

All ``--games`` games are played in lockstep: one jitted search over the batch per
ply on the jaxpuct side, OpenSpiel's bots stepped per game in Python; half the
games with jaxpuct moving first. Every move is cross-checked against OpenSpiel's
rules, and every result against OpenSpiel's (see ``jaxpuct/alphazero/arena.py``).
Prints W/D/L by colour with the score's 95% interval and the Elo difference.
Needs OpenSpiel: ``pip install 'jaxpuct[openspiel]'``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time

from jaxpuct.alphazero import arena, rundir
from jaxpuct.alphazero.checkpoints import CheckpointError
from jaxpuct.alphazero.config import SEARCH_SYMMETRIES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.arena",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    me = p.add_argument_group("jaxpuct player")
    me.add_argument("--run-dir", help="a training run (examples/selfplay.py's, or "
                    "examples/muzero.py's on connect_four): its network plays (default: a "
                    "pure search, see --value)")
    me.add_argument("--step", type=int, help="checkpoint of --run-dir (default: the newest)")
    me.add_argument("--game", choices=arena.ARENA_GAMES,
                    help="the game (a run's own game with --run-dir)")
    me.add_argument("--value", choices=("zero", "rollouts"), default="rollouts",
                    help="pure search's leaf value: zero, or one random rollout")
    me.add_argument("--simulations", type=int,
                    help="jaxpuct's simulations per move (default: the run's; 100 for a "
                    "pure search)")
    me.add_argument("--agent-selection", choices=("uct", "puct"), default=None,
                    help="a pure search's rule: UCT as MCTSBot's (jaxpuct.PUCTConfig.uct), "
                    "or AlphaZero's PUCT with a uniform prior (default: uct)")
    me.add_argument("--agent-uct-c", type=float, default=None,
                    help="a pure UCT search's exploration constant (default: 2, MCTSBot's)")
    me.add_argument("--agent-tie-break", choices=("first", "random"), default=None,
                    help="a pure search's ties (UCT's untried moves): the lowest index "
                    "first, or a random order as MCTSBot's (default: first)")
    me.add_argument("--agent-solver", action=argparse.BooleanOptionalAction, default=None,
                    help="jaxpuct's search with the MCTS-solver (default: as the run "
                    "trained; off for a pure search)")
    me.add_argument("--agent-graph-search", action=argparse.BooleanOptionalAction,
                    default=None, help="the network of --run-dir searching a graph, "
                    "transpositions sharing a node (default: as the run trained)")
    me.add_argument("--agent-symmetry", choices=SEARCH_SYMMETRIES, default=None,
                    help="the network of --run-dir under the board's symmetries: one at "
                    "random per node, or the average over all (default: as the run trained)")
    me.add_argument("--agent-ensemble", default="",
                    help="other runs of the same network as --run-dir, separated by commas: "
                    "their newest checkpoints join its network, the search evaluating the "
                    "mean of their probabilities and values (jaxpuct.envs.ensemble); "
                    "RUN@STEP for checkpoint STEP of RUN")
    op = p.add_argument_group("OpenSpiel opponent")
    op.add_argument("--opponent", choices=("mcts", "random"), default="mcts")
    op.add_argument("--opponent-simulations", type=int, default=1000)
    op.add_argument("--uct-c", type=float, default=2.0)
    op.add_argument("--rollouts", type=int, default=1,
                    help="random rollouts per leaf of MCTSBot")
    op.add_argument("--solve", action=argparse.BooleanOptionalAction, default=True,
                    help="MCTSBot backs up proven values")
    p.add_argument("--games", type=int, default=64, help="games, half per colour")
    p.add_argument("--seed", type=int, default=0,
                   help="game g's bot is seeded with seed + g: matches meant to be "
                        "independent need seeds at least --games apart")
    p.add_argument("--json", help="also write the result to this file")
    p.add_argument("--record-roots", action="store_true",
                   help="with --json: each game record also keeps, for every move of "
                        "jaxpuct, its root's visits and Q per action (`roots`, null for "
                        "the bot's moves); not for a MuZero run")
    return p


def _finite(record: dict) -> dict:
    """Strict JSON: an infinite Elo bound becomes the string "inf" / "-inf"."""
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in record.items()}


def games_problem(games: int) -> str | None:
    """Why ``--games`` cannot be played (None: it can). Half the games are played
    with each colour, so an odd number would favour one."""
    if games < 2 or games % 2:
        return f"--games must be even and at least 2 (half the games per colour), got {games}"
    return None


def json_problem(path: str) -> str | None:
    """Why the result cannot be written to ``--json path`` (None: it can), found
    before any game is played rather than after all of them."""
    if os.path.isdir(path):
        return f"--json {path!r} is a directory; expected a file path"
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        return f"--json {path!r}: its directory {directory!r} does not exist"
    why = rundir.unwritable(directory)
    if why is None and os.path.exists(path) and not os.access(path, os.W_OK):
        why = "the file is read-only"
    return None if why is None else f"--json {path!r} is not writable: {why}"


def _is_muzero_run(run_dir: str) -> bool:
    """A run of ``examples/muzero.py`` (its saved config has MuZero's fields)."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        return "unroll_steps" in json.load(f)


def game_records(result: arena.MatchResult) -> list[dict]:
    """Each game of the match for ``--json``: who moved first, jaxpuct's result and
    the moves (pgx's action ids); with the agent's roots (``--record-roots``), each
    move's root or ``None`` (:attr:`jaxpuct.alphazero.arena.MatchResult.roots`)."""
    assert result.agent_first is not None and result.outcome is not None
    records = [{"agent_first": bool(first), "result": int(outcome), "moves": list(moves)}
               for first, outcome, moves in zip(result.agent_first, result.outcome,
                                                result.moves, strict=True)]
    if result.roots:
        for record, roots in zip(records, result.roots, strict=True):
            record["roots"] = list(roots)
    return records


def main(argv: list[str] | None = None) -> arena.MatchResult:
    args = build_parser().parse_args(argv)
    problem = games_problem(args.games) or (args.json and json_problem(args.json))
    if not problem and args.record_roots and not args.json:
        problem = "--record-roots keeps the roots in --json's game records: pass --json"
    if problem:
        sys.exit(f"error: {problem}")
    try:
        bot = arena.BotSpec(kind=args.opponent, simulations=args.opponent_simulations,
                            uct_c=args.uct_c, rollouts=args.rollouts, solve=args.solve)
        if args.run_dir and (args.agent_selection or args.agent_uct_c is not None
                             or args.agent_tie_break):
            sys.exit("error: --agent-selection, --agent-uct-c and --agent-tie-break set a "
                     "pure search's rule; a network of --run-dir searches with its prior "
                     "(PUCT)")
        if args.run_dir and _is_muzero_run(args.run_dir):
            from examples import muzero
            if args.agent_solver:
                sys.exit("error: --agent-solver is for known-rules searches; a MuZero "
                         "run's search has no terminal states to prove")
            if args.agent_symmetry or args.agent_ensemble or args.agent_graph_search:
                sys.exit("error: --agent-symmetry, --agent-ensemble and --agent-graph-search "
                         "are for known-rules searches (their network sees pgx's boards); not "
                         "for a MuZero run")
            if args.record_roots:
                sys.exit("error: --record-roots is for known-rules searches; not for a "
                         "MuZero run")
            agent, game, who = muzero.network_agent(args.run_dir, args.step, args.simulations)
        elif args.run_dir:
            agent, game, who = arena.network_agent(args.run_dir, args.step, args.simulations,
                                                   solver=args.agent_solver,
                                                   symmetry=args.agent_symmetry,
                                                   ensemble=arena.split_run_dirs(args.agent_ensemble),
                                                   graph_search=args.agent_graph_search,
                                                   root_stats=args.record_roots)
            if args.game and args.game != game:
                sys.exit(f"error: --game {args.game}, but {args.run_dir!r} trained {game}")
        else:
            if not args.game:
                sys.exit("error: pass --game (or --run-dir)")
            if args.agent_symmetry or args.agent_ensemble or args.agent_graph_search:
                sys.exit("error: --agent-symmetry, --agent-ensemble and --agent-graph-search "
                         "need --run-dir (they set a trained network's search)")
            if args.agent_selection == "puct" and args.agent_uct_c is not None:
                sys.exit("error: --agent-uct-c is UCT's constant; --agent-selection puct "
                         "has none")
            game = args.game
            agent, who = arena.pure_search_agent(
                game, args.simulations or 100, args.value, solver=bool(args.agent_solver),
                selection=args.agent_selection or "uct",
                uct_c=2.0 if args.agent_uct_c is None else args.agent_uct_c,
                tie_break=args.agent_tie_break or "first", root_stats=args.record_roots)
    except (ValueError, CheckpointError) as err:
        sys.exit(f"error: {err}")
    print(f"{game}, {args.games} games: {who}\n  vs {bot.describe()}", flush=True)
    start = time.time()
    try:
        result = arena.play_match(agent, game, bot, args.games, seed=args.seed)
    except ValueError as err:
        sys.exit(f"error: {err}")
    print(result.report())
    print(f"({time.time() - start:.0f} s, of which {result.bot_seconds:.0f} s in OpenSpiel's "
          f"bots; mean game length {result.plies.mean():.1f} plies)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"game": game, "player": who, "opponent": bot.describe(),
                       "games": args.games, "seed": args.seed,
                       **{k: _finite(dataclasses.asdict(getattr(result, k)))
                          for k in ("first", "second", "total")},
                       "game_records": game_records(result)}, f, indent=1)
    return result


if __name__ == "__main__":
    main()
