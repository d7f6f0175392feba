// An exact connect-four solver that knows how far the end is: the score of every
// move, for the perfect-play position sets of benchmarks/connect_four_sets.py.
//
// jaxpuct.testing.connect_four solves in Python on the three values win / draw /
// loss, fast enough for end-games. The sets need more: positions from the first
// moves, and how many moves the game lasts under perfect play. The technique is
// that of Pascal Pons' tutorial "Solving Connect 4: how to build a perfect AI"
// (blog.gamesolver.org, 2019) and of John Tromp's Fhourstones; the code is ours.
//
// Score of a position for the player to move, as in that tutorial: 0 for a draw;
// when the player to move wins with the k-th stone of the game (counting every
// stone on the board, k in 1..42), (44 - k) / 2 (integer division); when the
// opponent wins with the k-th stone, -(44 - k) / 2. A faster win scores more and a
// slower loss scores more, so the best move is the one of highest score, and the
// score gives the number of moves left under perfect play.
//
// Board: two 64-bit words, the stones of the player to move and the mask of all
// stones. Column c owns bits 7c .. 7c + 6, bit 7c + r is row r from the bottom,
// and bit 7c + 6 is a guard that is never set, so shifts across a column edge
// find no stones and `stones + mask` is a unique key of the position.
//
// Search: negamax with alpha-beta (fail-soft) on scores; a transposition table
// of lower and upper bounds keyed by the full key; no move that lets the opponent
// win at once (forced blocks, no stone below an opponent's winning cell); bounds
// from the number of stones left; moves ordered by the winning cells they create,
// centre columns first among equals; the root solved by a sequence of null-window
// searches that halve the interval of possible scores.
//
// Input (stdin): one position a line, the columns played from the empty board as
// digits 1..7 (an empty line is the empty board). Output (stdout), one line each:
// the scores of the seven moves, "x" for a full column, then the number of
// search nodes. A line that is not a legal sequence of moves (a full column, a
// digit out of range, a move after the game was won) prints "error: ..." on that
// line, and the program goes on with the next one.
//
// Build: g++ -O2 -std=c++17 -o connect_four_solver connect_four_solver.cc

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

using u64 = std::uint64_t;

constexpr int kWidth = 7;
constexpr int kHeight = 6;
constexpr int kCells = kWidth * kHeight;
constexpr int kBits = kHeight + 1;  // six rows and the guard bit

constexpr u64 BottomRow() {
  u64 b = 0;
  for (int c = 0; c < kWidth; ++c) b |= u64{1} << (c * kBits);
  return b;
}
constexpr u64 kBottom = BottomRow();
constexpr u64 kBoard = kBottom * ((u64{1} << kHeight) - 1);
constexpr int kCentreFirst[kWidth] = {3, 2, 4, 1, 5, 0, 6};

u64 ColumnBits(int c) { return ((u64{1} << kHeight) - 1) << (c * kBits); }

int Popcount(u64 x) { return __builtin_popcountll(x); }

// Empty cells where one more stone of `stones` would complete four.
u64 WinningCells(u64 stones, u64 mask) {
  u64 r = (stones << 1) & (stones << 2) & (stones << 3);  // vertical: three below
  for (int d : {kBits, kBits - 1, kBits + 1}) {  // horizontal and both diagonals
    u64 p = (stones << d) & (stones << 2 * d);
    r |= p & (stones << 3 * d);
    r |= p & (stones >> d);
    p = (stones >> d) & (stones >> 2 * d);
    r |= p & (stones >> 3 * d);
    r |= p & (stones << d);
  }
  return r & (kBoard ^ mask);
}

bool HasFour(u64 s) {
  for (int d : {1, kBits, kBits - 1, kBits + 1}) {
    u64 m = s & (s >> d);
    if (m & (m >> 2 * d)) return true;
  }
  return false;
}

struct Entry {
  u64 key = 0;  // 0: empty (no position has key 0: the key includes the mask)
  std::int8_t lower = 0;
  std::int8_t upper = 0;
};

class Solver {
 public:
  explicit Solver(int log2_entries) : shift_(64 - log2_entries), table_(std::size_t{1} << log2_entries) {}

  long long nodes() const { return nodes_; }

  // The score (see the top of the file) of the position for the player to move.
  int Solve(u64 stones, u64 mask, int n) {
    u64 possible = (mask + kBottom) & kBoard;
    if (WinningCells(stones, mask) & possible) return (kCells + 1 - n) / 2;
    int lo = -(kCells - n) / 2;
    int hi = (kCells + 1 - n) / 2;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      // Probe near zero first: most positions are decided by a narrow margin
      // of the sign, and a narrow window there is cheap.
      if (mid <= 0 && lo / 2 < mid) {
        mid = lo / 2;
      } else if (mid >= 0 && hi / 2 > mid) {
        mid = hi / 2;
      }
      int r = Negamax(stones, mask, n, mid, mid + 1);
      if (r <= mid) {
        hi = r;
      } else {
        lo = r;
      }
    }
    return lo;
  }

 private:
  std::size_t Index(u64 key) const { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }

  // Negamax on the score, fail-soft: the result r satisfies r <= alpha -> score
  // <= r, r >= beta -> score >= r, and otherwise r is the score. The player to
  // move must have no immediate win (callers check), and the game is not over.
  int Negamax(u64 stones, u64 mask, int n, int alpha, int beta) {
    ++nodes_;
    const u64 opponent = stones ^ mask;
    const u64 possible = (mask + kBottom) & kBoard;
    const u64 opponent_wins = WinningCells(opponent, mask);
    u64 moves = possible;
    const u64 forced = possible & opponent_wins;
    if (forced) {
      if (forced & (forced - 1)) return -(kCells - n) / 2;  // two threats: lost next move
      moves = forced;
    }
    moves &= ~(opponent_wins >> 1);  // never play below an opponent's winning cell
    if (!moves) return -(kCells - n) / 2;
    // No win now and a move that does not lose next: the last two stones
    // cannot decide the game.
    if (n >= kCells - 2) return 0;

    // The opponent cannot win with the next stone, nor we with this one.
    const int lower_bound = -(kCells - 2 - n) / 2;
    const int upper_bound = (kCells - 1 - n) / 2;
    if (lower_bound >= beta) return lower_bound;
    if (upper_bound <= alpha) return upper_bound;
    if (alpha < lower_bound) alpha = lower_bound;
    if (beta > upper_bound) beta = upper_bound;

    const u64 key = stones + mask;
    Entry& e = table_[Index(key)];
    if (e.key == key) {
      if (e.lower >= beta) return e.lower;
      if (e.upper <= alpha) return e.upper;
      if (e.lower > alpha) alpha = e.lower;
      if (e.upper < beta) beta = e.upper;
      if (alpha >= beta) return alpha;
    }

    // Order: more winning cells created first; centre first among equals
    // (insertion into a list kept sorted, stable for the centre order).
    u64 order[kWidth];
    int threats[kWidth];
    int count = 0;
    for (int i = 0; i < kWidth; ++i) {
      const u64 move = moves & ColumnBits(kCentreFirst[i]);
      if (!move) continue;
      const int t = Popcount(WinningCells(stones | move, mask | move));
      int j = count++;
      while (j > 0 && threats[j - 1] < t) {
        order[j] = order[j - 1];
        threats[j] = threats[j - 1];
        --j;
      }
      order[j] = move;
      threats[j] = t;
    }

    const int alpha0 = alpha;
    const int beta0 = beta;
    int best = -kCells;
    for (int i = 0; i < count; ++i) {
      const int v = -Negamax(opponent, mask | order[i], n + 1, -beta, -alpha);
      if (v > best) best = v;
      if (v > alpha) alpha = v;
      if (alpha >= beta) break;
    }

    Entry& slot = e;  // the search below never moves the table
    if (slot.key != key) {
      slot.key = key;
      slot.lower = static_cast<std::int8_t>(-kCells);
      slot.upper = static_cast<std::int8_t>(kCells);
    }
    if (best <= alpha0) {
      if (best < slot.upper) slot.upper = static_cast<std::int8_t>(best);
    } else if (best >= beta0) {
      if (best > slot.lower) slot.lower = static_cast<std::int8_t>(best);
    } else {
      slot.lower = slot.upper = static_cast<std::int8_t>(best);
    }
    return best;
  }

  int shift_;
  std::vector<Entry> table_;
  long long nodes_ = 0;
};

// Plays `line` (digits 1..7) from the empty board; false with a reason if it is
// not a legal game.
bool Play(const std::string& line, u64* stones, u64* mask, int* n, std::string* error) {
  *stones = 0;
  *mask = 0;
  *n = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == '\r' || ch == ' ') continue;
    if (ch < '1' || ch > '7') {
      *error = "character " + std::to_string(i) + " is not a column 1..7";
      return false;
    }
    const int c = ch - '1';
    if (HasFour(*stones ^ *mask)) {
      *error = "move " + std::to_string(i) + " comes after the game was won";
      return false;
    }
    if ((*mask & ColumnBits(c)) == ColumnBits(c)) {
      *error = "move " + std::to_string(i) + " plays in the full column " + std::to_string(c + 1);
      return false;
    }
    *stones ^= *mask;  // the opponent becomes the player to move
    *mask |= *mask + (u64{1} << (c * kBits));
    ++*n;
  }
  if (HasFour(*stones ^ *mask)) {
    *error = "the game is over";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int log2_entries = 24;
  if (argc > 1) log2_entries = std::stoi(argv[1]);
  Solver solver(log2_entries);
  std::string line;
  while (std::getline(std::cin, line)) {
    u64 stones, mask;
    int n;
    std::string error;
    if (!Play(line, &stones, &mask, &n, &error)) {
      std::printf("error: %s\n", error.c_str());
      std::fflush(stdout);
      continue;
    }
    const long long nodes0 = solver.nodes();
    const u64 possible = (mask + kBottom) & kBoard;
    const u64 wins = WinningCells(stones, mask) & possible;
    std::string out;
    for (int c = 0; c < kWidth; ++c) {
      const u64 move = possible & ColumnBits(c);
      if (!move) {
        out += "x ";
      } else if (move & wins) {
        out += std::to_string((kCells + 1 - n) / 2) + " ";
      } else {
        // After our stone the opponent moves: our score is minus theirs.
        out += std::to_string(-solver.Solve(stones ^ mask, mask | move, n + 1)) + " ";
      }
    }
    std::printf("%s%lld\n", out.c_str(), solver.nodes() - nodes0);
    std::fflush(stdout);
  }
  return 0;
}
