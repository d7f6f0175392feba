"""benchmarks.connect_four_errors: lost games filed by the agent's first one-move
error, on hand-built games whose errors are known."""

import json

import pytest

from benchmarks import connect_four_errors as errors
from jaxpuct.testing.connect_four import board_from_moves

# The agent moves first: it stacks three in column 0 while the opponent stacks three
# in column 6, then plays 5 where 0 wins at once; the opponent completes column 6.
MISSED_WIN = [0, 6, 0, 6, 0, 6, 5, 6]
# The agent moves first on 0, 2 and 4 (no three of its own); the opponent stacks three
# in column 6; the agent plays 1 instead of parrying at 6, and the opponent wins there.
UNPARRIED = [0, 6, 2, 6, 4, 6, 1, 6]
# The opponent moves first along the bottom row (2, 3, 4), the agent on top of it; at
# the agent's third move both 1 and 5 win for the opponent: no move is safe.
DOUBLE_THREAT = [2, 2, 3, 3, 4, 1, 5]
# The agent drops a stone under the opponent's winning cell: the opponent (first) has
# 0, 1, 2 on the second row from the bottom, and the cell at column 3 there becomes
# playable only once column 3 holds a stone. The agent's 3 gives it; 4 was safe.
UNDER_THE_THREAT = [1, 0, 0, 2, 2, 6, 1, 3, 3]


def test_the_hand_built_games_end_as_written():
    for moves in (MISSED_WIN, UNPARRIED, DOUBLE_THREAT, UNDER_THE_THREAT):
        assert board_from_moves(moves[:-1]).wins(moves[-1])
    assert errors.winning_columns(board_from_moves(DOUBLE_THREAT[:5])) == []
    assert errors.winning_columns(board_from_moves(DOUBLE_THREAT[:5] + [0])) == [1, 5]
    assert errors.safe_columns(board_from_moves(DOUBLE_THREAT[:5])) == []
    assert errors.winning_columns(board_from_moves(MISSED_WIN[:6])) == [0]
    assert errors.safe_columns(board_from_moves(UNPARRIED[:6])) == [6]
    before = board_from_moves(UNDER_THE_THREAT[:7])
    assert errors.winning_columns(before) == [] and errors.winning_columns(before.play(4)) == []
    assert 3 not in errors.safe_columns(before) and 4 in errors.safe_columns(before)


@pytest.mark.parametrize("moves, agent_first, expected", [
    (MISSED_WIN, True, "missed a win in one"),
    (UNPARRIED, True, "let the opponent win at once"),
    (DOUBLE_THREAT, False, "no safe move"),
    (UNDER_THE_THREAT, False, "let the opponent win at once"),
])
def test_each_lost_game_is_filed_under_its_first_error(moves, agent_first, expected):
    assert errors.first_error(moves, agent_first) == expected


def test_a_game_without_a_one_move_error_is_other():
    # The agent (second) plays 1, 2 and 3 while the opponent has at most two in a
    # line: every move of the agent is safe, so nothing is filed.
    assert errors.first_error([0, 1, 0, 2, 5, 3], agent_first=False) == "other"


def test_only_lost_games_are_counted_and_the_command_writes_them(tmp_path, capsys):
    records = [
        {"agent_first": True, "result": -1, "moves": MISSED_WIN},
        {"agent_first": True, "result": -1, "moves": UNPARRIED},
        {"agent_first": False, "result": -1, "moves": DOUBLE_THREAT},
        {"agent_first": False, "result": 1, "moves": MISSED_WIN},  # won: not counted
    ]
    assert errors.lost_games(records) == {"missed a win in one": 1,
                                          "let the opponent win at once": 1,
                                          "no safe move": 1, "other": 0}
    match, out = tmp_path / "match.json", tmp_path / "counts.json"
    match.write_text(json.dumps({"game_records": records}))
    errors.main([str(match), "--json", str(out)])
    assert "3 lost of 4" in capsys.readouterr().out
    assert json.loads(out.read_text())[str(match)]["no safe move"] == 1
    (tmp_path / "bare.json").write_text("{}")
    with pytest.raises(SystemExit, match="no game_records"):
        errors.main([str(tmp_path / "bare.json")])
