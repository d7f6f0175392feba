"""The perfect-play position sets: the C++ score solver against oracles (the
Python win/draw/loss solver, and a brute-force negamax on scores), the score
arithmetic against Pascal Pons' published examples, and the shipped files
against their own definition."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from benchmarks import connect_four_sets as cs
from jaxpuct.testing import connect_four as c4


@pytest.fixture(scope="module")
def solver(tmp_path_factory):
    # A fresh build from the source in the checkout, so the test checks this code.
    with cs.ScoreSolver(log2_entries=20, build_dir=str(tmp_path_factory.mktemp("c4"))) as s:
        yield s


def _positions(n: int, min_stones: int, max_stones: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < n:
        game = cs.random_game(rng)
        last = min(max_stones, len(game) - 1)
        if last >= min_stones:
            out.append(game[:int(rng.integers(min_stones, last + 1))])
    return out


def _brute_scores(moves: str) -> np.ndarray:
    """Every move's score by plain negamax over the whole remaining game."""
    @functools.cache
    def score(board: c4.Board) -> int:
        n = board.num_stones
        best = -99
        for col in np.flatnonzero(board.legal()):
            v = (43 - n) // 2 if board.wins(int(col)) else -score(board.play(int(col)))
            best = max(best, v)
        return 0 if best == -99 else best

    board = c4.board_from_moves([int(ch) - 1 for ch in moves])
    n = board.num_stones
    return np.array([
        np.nan if not board.legal()[c] else
        float((43 - n) // 2 if board.wins(c) else -score(board.play(c)))
        for c in range(cs.COLUMNS)])


@pytest.mark.slow
def test_pons_examples(solver):
    # blog.gamesolver.org, "Part 2": "4455" scores 18 (a win with the 4th stone),
    # "44455554221" scores -15 whatever is played.
    s = solver.move_scores("4455")
    assert np.nanmax(s) == 18
    assert cs.moves_left(18, 4) == 3
    assert np.array_equal(solver.move_scores("44455554221"), np.full(7, -15.0))
    assert cs.moves_left(-15, 11) == 2


def test_scores_match_brute_force(solver):
    for moves in _positions(25, 33, 38, seed=1):
        np.testing.assert_array_equal(solver.move_scores(moves), _brute_scores(moves),
                                      err_msg=moves)


def test_signs_match_python_solver(solver):
    for moves in _positions(60, 26, 34, seed=2):
        board = c4.board_from_moves([int(ch) - 1 for ch in moves])
        np.testing.assert_array_equal(np.sign(solver.move_scores(moves)),
                                      c4.move_values(board), err_msg=moves)


def test_bad_lines_are_reported_and_skipped(solver):
    with pytest.raises(ValueError, match="full column 4"):
        solver.move_scores("4444444")
    with pytest.raises(ValueError, match="not a column"):
        solver.move_scores("48")
    with pytest.raises(ValueError, match="game is over"):
        solver.move_scores("1212121")
    # The process goes on. (An end-game position: "4455" costs the solver about 7 s.)
    moves = _positions(1, 33, 38, seed=4)[0]
    np.testing.assert_array_equal(solver.move_scores(moves), _brute_scores(moves))


def test_moves_left_matches_play(solver):
    # Follow the best move to the end: the number of plies is what moves_left says.
    for moves in _positions(20, 30, 38, seed=3):
        best = int(np.nanmax(solver.move_scores(moves)))
        left, line = cs.moves_left(best, len(moves)), moves
        plies = 0
        while True:
            s = solver.move_scores(line)
            col = int(np.nanargmax(s))
            board = c4.board_from_moves([int(ch) - 1 for ch in line])
            plies += 1
            if board.wins(col) or len(line) + 1 == cs.CELLS:
                break
            line += str(col + 1)
        assert plies == left, moves


def test_judge_and_critical_by_hand():
    nan = np.nan
    scores = np.array([[3, -2, 0, 3, nan, -1, 1],      # win: 3 and 3 optimal, 1 keeps
                       [0, 0, -4, nan, nan, nan, nan],  # draw
                       [-3, -3, -5, -3, -3, -3, -3]])   # lost whatever: not critical
    actions = np.array([6, 1, 2])  # a slower loss is lost all the same: it keeps
    keeps, optimal = cs.judge(scores, actions)
    np.testing.assert_array_equal(keeps, [True, True, True])
    np.testing.assert_array_equal(optimal, [False, True, False])
    keeps, optimal = cs.judge(scores, np.array([4, 3, 0]))  # illegal twice
    np.testing.assert_array_equal(keeps, [False, False, True])
    np.testing.assert_array_equal(optimal, [False, False, True])
    np.testing.assert_array_equal(cs.critical(scores), [True, True, False])


@pytest.mark.parametrize("name", cs.SET_NAMES)
def test_shipped_sets(name, solver):
    assert name in cs.available(), f"benchmarks/data/connect_four/{name}.txt is missing"
    s = cs.load(name)
    (lo, hi), (dlo, dhi) = cs.stage_and_difficulty(name)
    if name in ("end_easy", "middle_easy", "middle_medium"):
        assert len(s.moves) >= 1000
    assert len(set(s.moves)) == len(s.moves)
    assert np.all((s.stones >= lo) & (s.stones <= hi))
    left = np.array([cs.moves_left(int(b), int(n)) for b, n in zip(s.best, s.stones, strict=True)])
    assert np.all((left >= dlo) & (left <= dhi))
    if name.startswith("begin"):
        return  # seconds to minutes a position: `--check` re-solves them
    for i in np.random.default_rng(0).choice(len(s.moves), 10, replace=False):
        np.testing.assert_array_equal(solver.move_scores(s.moves[i]), s.scores[i])


def test_a_generated_set_is_written_where_asked_and_checks_out(tmp_path, solver):
    """``generate`` with another seed gives a set of its stage and difficulty, which
    ``save``/``load``/``check`` write and read in another directory than the shipped
    one (``--data-dir``), and which the re-solving check passes."""
    data_dir = str(tmp_path / "sets")
    made = cs.generate(["end_easy"], 6, seed=5, max_seconds=120, solver=solver, log=lambda *_: 0)
    cs.save(made["end_easy"], data_dir)
    assert cs.available(data_dir) == ["end_easy"]
    back = cs.load("end_easy", data_dir)
    assert back.moves == made["end_easy"].moves and len(back.moves) == 6
    np.testing.assert_array_equal(back.scores, made["end_easy"].scores)
    assert cs.check(["end_easy"], 6, 0, solver, log=lambda *_: 0, directory=data_dir)


def test_scorer_summary():
    from benchmarks.connect_four_perfect import summarise, wilson
    from jaxpuct.alphazero.scores import Z_95
    lo, hi = wilson(0, 200)
    assert lo == pytest.approx(0.0, abs=1e-12)
    assert hi == pytest.approx(Z_95**2 / (200 + Z_95**2))  # the closed form at p = 0
    scores = np.array([[1, -1, np.nan, -1, -1, -1, -1], [-2] * 7])
    r = summarise(scores, np.array([1, 0]))
    assert (r["n"], r["n_critical"], r["keeps"], r["optimal"]) == (2, 1, 0.5, 0.5)
    assert r["keeps_critical"] == 0.0


def test_checkpoint_steps_of_a_curve():
    from benchmarks.connect_four_perfect import checkpoint_steps
    assert checkpoint_steps("all", [300, 100, 200]) == [100, 200, 300]
    assert checkpoint_steps("100, 300", [100, 200, 300]) == [100, 300]
    with pytest.raises(SystemExit, match=r"no checkpoint at \[250\]; the run has \[100, 200\]"):
        checkpoint_steps("100,250", [200, 100])


@pytest.mark.slow
def test_play_settings_search_is_the_perfect_benchmarks_and_its_cli(tmp_path, capsys):
    """``connect_four_play_settings``' ``base`` is the search that
    ``connect_four_perfect`` scores (the same moves on the same positions), its
    other settings are legal searches, the command line refuses a name it does not
    know, and an ensemble of the run with itself plays as the run."""
    pytest.importorskip("orbax.checkpoint")
    import json

    import jaxpuct.alphazero as az
    from benchmarks import connect_four_perfect as cp
    from benchmarks import connect_four_play_settings as ps
    from benchmarks.connect_four_probe import Probe
    from jaxpuct.alphazero import checkpoints

    config = az.SelfPlayConfig(game="connect_four", network="resnet", channels=4, blocks=1,
                               hidden=(8,), batch_size=2, num_simulations=8)
    run_dir = str(tmp_path / "run")
    checkpoints.save_checkpoint(run_dir, az.Trainer(config).init(), config)
    probe = Probe(run_dir, [8], 8)
    position_set = cs.load("end_easy")
    state, legal = cp.set_states(position_set, 8)
    params = probe.network(probe.steps()[-1])[1]
    expected = cp.agent_actions(probe, params, state, legal, [8])[8][0]

    record = str(tmp_path / "settings.json")
    data_dir = str(tmp_path / "sets")  # the first 8 positions, read from another directory
    cs.save(cs.PositionSet("end_easy", position_set.moves[:8], position_set.scores[:8]),
            data_dir)
    assert ps.main(["--run-dir", run_dir, "--settings", "base,graph_solver", "--simulations",
                    "8", "--set", "end_easy", "--batch", "8", "--data-dir", data_dir,
                    "--json", record]) == 0
    rows = json.load(open(record))["results"]
    assert [r["setting"] for r in rows] == ["base", "graph_solver"]
    np.testing.assert_array_equal(rows[0]["actions"], expected)
    assert rows[0]["keeps"] == cp.summarise(position_set.scores[:8], expected)["keeps"]
    assert legal[np.arange(8), rows[1]["actions"]].all()

    # The mirror-averaged network is equivariant exactly (the mean of two numbers does
    # not depend on their order), and so is its search: on each position's mirror image
    # it gives the mirror image of the visit distribution. (Not the move itself: a tie
    # in visits goes to the lower column both times.)
    import dataclasses
    mirrored = dataclasses.replace(
        position_set, moves=tuple(m.translate(str.maketrans("1234567", "7654321"))
                                  for m in position_set.moves),
        scores=position_set.scores[:, ::-1])
    mirror_state, _ = cp.set_states(mirrored, 8)
    search = ps.setting_search(probe, 8, ps.settings()["mirror_average"])
    keys = jax.random.split(jax.random.key(0), 8)

    def visits(search, state):
        return np.asarray(search(params, keys, state).search_tree.summary().visit_counts)

    np.testing.assert_array_equal(visits(search, mirror_state),
                                  visits(search, state)[:, ::-1])
    # Not so for the plain network, whose search that check would fail.
    logits = np.asarray(probe.apply(params, state.observation)[0])
    mirror_logits = np.asarray(probe.apply(params, mirror_state.observation)[0])
    assert np.abs(mirror_logits - logits[:, ::-1]).max() > 1e-3

    capsys.readouterr()
    with pytest.raises(SystemExit):
        ps.main(["--run-dir", run_dir, "--settings", "base,nonsense"])
    assert "unknown ['nonsense']" in capsys.readouterr().err

    # An ensemble (--ensemble) of the run with a copy of itself is the run: the mean of
    # two equal networks is that network (its search through network_agent is checked
    # in tests/test_reliability.py; here the benchmark's stacking and its prior).
    import shutil
    copy = str(tmp_path / "copy")
    shutil.copytree(run_dir, copy)
    pair = Probe(run_dir, [], 8, ensemble=[copy])
    stacked = pair.params(probe.steps()[-1])
    assert jax.tree.leaves(stacked)[0].shape[0] == 2
    pair_logits, pair_value = pair.apply(stacked, state.observation)
    np.testing.assert_allclose(jax.nn.softmax(pair_logits), jax.nn.softmax(logits),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pair_value, probe.apply(params, state.observation)[1],
                               rtol=1e-5, atol=1e-6)
    # ... and the play-settings benchmark with it (--ensemble) plays the run's moves.
    assert ps.main(["--run-dir", run_dir, "--ensemble", copy, "--settings", "base",
                    "--simulations", "8", "--set", "end_easy", "--batch", "8",
                    "--data-dir", data_dir, "--json", record]) == 0
    written = json.load(open(record))
    assert [m["run_dir"] for m in written["ensemble"]] == [copy]
    np.testing.assert_array_equal(written["results"][0]["actions"], expected)
    # A member of another network is refused by name.
    other = dataclasses.replace(config, channels=8)
    checkpoints.save_checkpoint(str(tmp_path / "wide"), az.Trainer(other).init(), other)
    with pytest.raises(SystemExit,
                       match="--ensemble: ensemble member .* has another network: channels 8 "
                       "against 4"):
        Probe(run_dir, [], 8, ensemble=[str(tmp_path / "wide")])
    # RUN_DIR@STEP names a checkpoint (a snapshot ensemble); a missing one or a step
    # that is not a number is refused by name.
    from jaxpuct.alphazero import arena as arena_lib
    step = probe.steps()[-1]
    [(member, iteration, member_params)] = arena_lib.ensemble_members([f"{copy}@{step}"],
                                                                      config)
    assert (member, iteration) == (copy, step)
    np.testing.assert_array_equal(jax.tree.leaves(member_params)[0],
                                  jax.tree.leaves(params)[0])
    with pytest.raises(checkpoints.CheckpointError, match=f"no checkpoint {step + 1} in"):
        arena_lib.ensemble_members([f"{copy}@{step + 1}"], config)
    with pytest.raises(ValueError, match="RUN_DIR@STEP with STEP a checkpoint number, got "
                       "step 'last'"):
        arena_lib.ensemble_members([f"{copy}@last"], config)
