"""benchmarks.connect_four_errors: lost games filed by the agent's first one-move
error, on hand-built games whose errors are known."""

import json

import numpy as np
import pytest

from benchmarks import connect_four_errors as errors

# The agent moves first: it stacks three in column 0 while the opponent stacks three
# in column 6, then plays 5 where 0 wins at once; the opponent completes column 6.
MISSED_WIN = [0, 6, 0, 6, 0, 6, 5, 6]
# The agent moves first on 0, 2 and 4 (no three of its own); the opponent stacks three
# in column 6; the agent plays 1 instead of parrying at 6, and the opponent wins there.
UNPARRIED = [0, 6, 2, 6, 4, 6, 1, 6]
# The opponent moves first along the bottom row (2, 3, 4), the agent on top of it; at
# the agent's third move both 1 and 5 win for the opponent: no move is safe.
DOUBLE_THREAT = [2, 2, 3, 3, 4, 1, 5]


def board_after(moves):
    board = np.zeros((6, 7), np.int8)
    for ply, column in enumerate(moves):
        board = errors.drop(board, column, 1 + ply % 2)
    return board


def test_stones_land_on_the_lowest_empty_cell_and_a_full_column_is_refused():
    board = board_after([3, 3, 3])
    assert board[5, 3] == 1 and board[4, 3] == 2 and board[3, 3] == 1
    assert board.sum() == 4 and board[:3].sum() == 0
    full = board_after([0] * 6)
    with pytest.raises(ValueError, match="column 0 is full"):
        errors.drop(full, 0, 1)
    assert errors.legal_columns(full) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("cells", [
    [(5, 0), (5, 1), (5, 2), (5, 3)],   # a row
    [(2, 6), (3, 6), (4, 6), (5, 6)],   # a column
    [(5, 0), (4, 1), (3, 2), (2, 3)],   # a rising diagonal
    [(2, 3), (3, 4), (4, 5), (5, 6)],   # a falling diagonal
])
def test_four_in_any_line_wins_and_three_does_not(cells):
    board = np.zeros((6, 7), np.int8)
    for i, j in cells[:3]:
        board[i, j] = 2
    assert not errors.has_four(board, 2)
    board[cells[3]] = 2
    assert errors.has_four(board, 2) and not errors.has_four(board, 1)


def test_the_hand_built_games_end_as_written():
    for moves, winner in ((MISSED_WIN, 2), (UNPARRIED, 2), (DOUBLE_THREAT, 1)):
        board = board_after(moves)
        assert errors.has_four(board, winner)
        assert not errors.has_four(board_after(moves[:-1]), winner)
    assert errors.winning_columns(board_after(DOUBLE_THREAT[:5]), 1) == [1, 5]


@pytest.mark.parametrize("moves, agent_first, expected", [
    (MISSED_WIN, True, "missed a win in one"),
    (UNPARRIED, True, "let the opponent win at once"),
    (DOUBLE_THREAT, False, "no safe move"),
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
