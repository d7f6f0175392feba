"""Multi-agent path finding on a small grid: a JAX model for search and an exact
A* planner in NumPy (the large-discrete-space problem of sampled search).

``F`` agents (4 in ``benchmarks/pathfinding.py``) on an ``H x W`` grid with
obstacles, each with its own goal cell. A joint action is one move per agent,
``stay, N, S, E, W`` (5 values), so there are ``5^F`` joint actions (625 for 4
agents); its id is mixed radix with agent 0 most significant, the encoding of
:class:`jaxpuct.sampled.FactoredActions` ``((5,) * F)``.

Rules:

* A move into an obstacle or off the grid is illegal for that agent (a mask over
  the agent's own 5 moves, so the joint mask is a product of factor masks);
  ``stay`` is always legal.
* A **collision** (two agents ending on one cell, or two agents swapping cells)
  makes the whole joint move void: every agent stays where it was, and the step
  costs as usual. So a colliding joint move is worth exactly the all-stay move,
  never more, and the optimal cost is that of the problem where collisions are
  illegal. Void rather than illegal because "no two agents on one cell" is not a
  product of per-agent masks: :class:`jaxpuct.sampled.FactoredActions` draws joint
  moves from per-agent heads and cannot mask it, and all searches compared here
  play by the same rule.
* **Cost**: each step costs the number of agents that are not at their goal at
  the start of the step (an agent waiting at its goal is free). For a plan where
  each agent reaches its goal at ``T_i`` and stays, that is the usual
  sum-of-costs ``Σ T_i``; an agent that leaves its goal pays for its time away.
  The episode ends when every agent is at its goal (terminal, value 0).

The model given to the search (the true dynamics, no learning):

* ``reward = -cost`` of the step, ``discount = 1``, ``terminal`` when all agents
  are at their goals;
* ``value = -Σ_i d_i(p_i)``, minus the sum of the agents' remaining shortest-path
  distances (each ignoring the others): the A* heuristic below, an optimistic
  estimate;
* the policy head: per agent, logit ``-beta · (d_i(next) - d_i(here))`` over
  its legal moves (``+beta`` towards its goal, ``-beta`` away, 0 to stay;
  ``beta = 1``), given per agent (``[B, 5F]`` factor logits, for
  ``FactoredActions``) or summed over the joint moves (``[B, 5^F]``, for
  full-width search and ``DiscreteActions``).

The exact planner (:func:`optimal_cost`) is A* (Hart, Nilsson and Raphael 1968)
over the joint state with the sum of individual shortest-path distances as the
heuristic: admissible and consistent, since a step lowers each agent's distance
by at most 1 and costs 1 for every agent not at its goal (Standley, "Finding
Optimal Solutions to Cooperative Pathfinding Problems", AAAI 2010, uses the same
heuristic).
"""

from __future__ import annotations

import heapq
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.types import RecurrentFnOutput, RootFnOutput

__all__ = ["Instances", "State", "make_instances", "optimal_cost", "plan_moves", "model",
           "step", "decode", "NUM_MOVES", "MOVES"]

# stay, N, S, E, W as (row, column) offsets.
MOVES = np.array([(0, 0), (-1, 0), (1, 0), (0, 1), (0, -1)], np.int32)
NUM_MOVES = 5
_PRIOR_BETA = 1.0


class Instances(NamedTuple):
    """A batch of grid instances (``params`` of the model).

    Attributes:
      move_to: ``[I, C, 5]`` int32, the cell reached from cell ``c`` by each move
        (``c`` itself where the move is blocked); ``C = H · W``.
      legal: ``[I, C, 5]`` bool, the moves not blocked (``stay`` always).
      distance: ``[I, F, C]`` float32, agent ``i``'s shortest-path distance from
        each cell to its goal (a large number at obstacles).
      start: ``[I, F]`` int32 start cells.
      goal: ``[I, F]`` int32 goal cells.
    """

    move_to: np.ndarray
    legal: np.ndarray
    distance: np.ndarray
    start: np.ndarray
    goal: np.ndarray


class State(NamedTuple):
    """The search's embedding: ``cells [B, F]`` int32 and ``instance [B]`` int32
    (the row of :class:`Instances` the state belongs to)."""

    cells: jax.Array
    instance: jax.Array


def _neighbours(free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(move_to [C, 5], legal [C, 5])`` of a grid ``free [H, W]`` bool."""
    height, width = free.shape
    move_to = np.zeros((height * width, NUM_MOVES), np.int32)
    legal = np.zeros((height * width, NUM_MOVES), bool)
    for r, c in itertools.product(range(height), range(width)):
        cell = r * width + c
        for m, (dr, dc) in enumerate(MOVES):
            nr, nc = r + dr, c + dc
            ok = 0 <= nr < height and 0 <= nc < width and free[nr, nc] and free[r, c]
            ok = ok or m == 0
            legal[cell, m] = ok
            move_to[cell, m] = nr * width + nc if ok else cell
    return move_to, legal


def _distances(move_to: np.ndarray, goal: int, unreachable: float) -> np.ndarray:
    """``[C]`` breadth-first distances to ``goal`` over ``move_to``'s moves."""
    dist = np.full(move_to.shape[0], unreachable, np.float32)
    dist[goal] = 0.0
    frontier = [goal]
    while frontier:
        nxt = []
        for cell in frontier:
            # Moves are symmetric (N/S, E/W), so the cells reaching `cell` are
            # those `cell` reaches.
            for other in move_to[cell, 1:]:
                if other != cell and dist[other] == unreachable:
                    dist[other] = dist[cell] + 1.0
                    nxt.append(int(other))
        frontier = nxt
    return dist


def make_instances(num_instances: int, size: int = 5, num_agents: int = 4,
                   num_obstacles: int = 4, seed: int = 0) -> Instances:
    """``num_instances`` random ``size x size`` grids, each with ``num_obstacles``
    obstacle cells (the free cells connected) and ``num_agents`` distinct starts
    and distinct goals, drawn from NumPy's ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    cells = size * size
    unreachable = float(4 * cells)
    out: list[tuple[np.ndarray, ...]] = []
    while len(out) < num_instances:
        free = np.ones(cells, bool)
        free[rng.choice(cells, num_obstacles, replace=False)] = False
        move_to, legal = _neighbours(free.reshape(size, size))
        open_cells = np.flatnonzero(free)
        if np.any(_distances(move_to, int(open_cells[0]), unreachable)[open_cells]
                  == unreachable):
            continue  # the free cells are not connected: draw again
        start = rng.choice(open_cells, num_agents, replace=False).astype(np.int32)
        goal = rng.choice(open_cells, num_agents, replace=False).astype(np.int32)
        distance = np.stack([_distances(move_to, int(g), unreachable) for g in goal])
        out.append((move_to, legal, distance, start, goal))
    return Instances(*(np.stack(x) for x in zip(*out, strict=True)))


# ------------------------------------------------------------------- dynamics


def decode(action: jax.Array, num_agents: int) -> jax.Array:
    """Joint ids ``[B]`` -> moves ``[B, F]`` (agent 0 most significant)."""
    moves, rest = [], action.astype(jnp.int32)
    for _ in range(num_agents):
        moves.append(rest % NUM_MOVES)
        rest = rest // NUM_MOVES
    return jnp.stack(moves[::-1], axis=-1)


def step(params: Instances, state: State, action: jax.Array
         ) -> tuple[State, jax.Array, jax.Array]:
    """One joint move ``action [B]`` (ids): ``(next state, cost [B], done [B])``.

    A move blocked for its agent leaves that agent in place; a collision (two
    agents on one cell, or a swap) voids the whole joint move (module docstring).
    """
    inst, cells = state.instance, state.cells
    num_agents = cells.shape[1]
    moves = decode(action, num_agents)
    move_to = jnp.asarray(params.move_to)[inst]                      # [B, C, 5]
    proposed = jnp.take_along_axis(
        jnp.take_along_axis(move_to, cells[:, :, None], axis=1), moves[:, :, None],
        axis=2)[:, :, 0]                                                # [B, F]
    same = proposed[:, :, None] == proposed[:, None, :]
    swap = (proposed[:, :, None] == cells[:, None, :]) & (proposed[:, None, :]
                                                         == cells[:, :, None])
    off_diagonal = ~jnp.eye(num_agents, dtype=jnp.bool_)
    collision = jnp.any((same | swap) & off_diagonal, axis=(1, 2))
    new_cells = jnp.where(collision[:, None], cells, proposed)
    goal = jnp.asarray(params.goal)[inst]
    cost = jnp.sum(cells != goal, axis=-1).astype(jnp.float32)
    done = jnp.all(new_cells == goal, axis=-1)
    return State(cells=new_cells, instance=inst), cost, done


def _evaluate(params: Instances, state: State, joint: bool
              ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(logits, legal, value [B])``: factor logits and mask ``[B, 5F]``, or
    joint ones ``[B, 5^F]`` (``joint``); the value minus the summed distances."""
    inst, cells = state.instance, state.cells
    batch, num_agents = cells.shape
    move_to = jnp.asarray(params.move_to)[inst]                       # [B, C, 5]
    legal = jnp.asarray(params.legal)[inst[:, None], cells]           # [B, F, 5]
    nxt = move_to[jnp.arange(batch)[:, None], cells]                  # [B, F, 5]
    distance = jnp.asarray(params.distance)[inst]                      # [B, F, C]
    here = jnp.take_along_axis(distance, cells[:, :, None], axis=2)    # [B, F, 1]
    there = jnp.take_along_axis(distance, nxt, axis=2)                 # [B, F, 5]
    logits = jnp.where(legal, -_PRIOR_BETA * (there - here), -jnp.inf)
    value = -jnp.sum(here[:, :, 0], axis=-1)
    if not joint:
        return logits.reshape(batch, -1), legal.reshape(batch, -1), value
    # Joint logits: Σ_i logit_i(m_i) over every joint move (agent 0 most significant).
    total = jnp.zeros((batch, 1), jnp.float32)
    ok = jnp.ones((batch, 1), jnp.bool_)
    for i in range(num_agents):
        total = (total[:, :, None] + logits[:, i, None, :]).reshape(batch, -1)
        ok = (ok[:, :, None] & legal[:, i, None, :]).reshape(batch, -1)
    return jnp.where(ok, total, -jnp.inf), ok, value


def model(joint: bool):
    """``(root_fn, recurrent_fn)`` of the model (module docstring).

    ``root_fn(params, state) -> RootFnOutput``; ``recurrent_fn`` is the search's
    ``(params, key, action [B], state) -> (RecurrentFnOutput, state)``. With
    ``joint`` the policy head is the ``[B, 5^F]`` joint logits (full width,
    ``DiscreteActions``), else the ``[B, 5F]`` per-agent logits
    (``FactoredActions((5,) * F)``).
    """

    def root_fn(params: Instances, state: State) -> RootFnOutput:
        logits, legal, value = _evaluate(params, state, joint)
        return RootFnOutput(prior_logits=logits, value=value, embedding=state,
                            legal_action_mask=legal)

    def recurrent_fn(params: Instances, key: jax.Array, action: jax.Array, state: State
                     ) -> tuple[RecurrentFnOutput, State]:
        del key
        new, cost, done = step(params, state, action)
        logits, legal, value = _evaluate(params, new, joint)
        out = RecurrentFnOutput(reward=-cost, discount=jnp.ones_like(cost),
                                prior_logits=logits, value=jnp.where(done, 0.0, value),
                                legal_action_mask=legal, terminal=done)
        return out, new

    return root_fn, recurrent_fn


# -------------------------------------------------------------- exact planner


def _joint_moves(num_agents: int) -> np.ndarray:
    """``[5^F, F]`` every joint move, in id order."""
    return np.array(list(itertools.product(range(NUM_MOVES), repeat=num_agents)), np.int32)


def optimal_cost(instances: Instances, index: int, heuristic: bool = True,
                 max_expansions: int = 2_000_000) -> tuple[float, np.ndarray]:
    """The optimal cost of instance ``index`` and an optimal plan, by A* over
    joint states (module docstring); NumPy.

    Collisions are illegal here (a void move equals staying, so it never helps).
    ``heuristic=False`` is uniform-cost search (Dijkstra), the same optimum with
    no heuristic (a check of the heuristic's admissibility).

    Returns:
      ``(cost, plan [L + 1, F] int32)``: the joint states from the start to the
      goals, ``L`` steps.

    Raises:
      RuntimeError: past ``max_expansions`` expanded states, or no plan.
    """
    move_to = instances.move_to[index]
    distance = instances.distance[index]
    start = tuple(int(c) for c in instances.start[index])
    goal = tuple(int(c) for c in instances.goal[index])
    num_agents = len(start)
    joint = _joint_moves(num_agents)
    agents = np.arange(num_agents)
    off_diagonal = ~np.eye(num_agents, dtype=bool)

    def estimate(cells: tuple[int, ...]) -> float:
        return float(distance[agents, list(cells)].sum()) if heuristic else 0.0

    best = {start: 0.0}
    parent: dict[tuple[int, ...], tuple[int, ...]] = {}
    queue = [(estimate(start), 0.0, start)]
    closed: set[tuple[int, ...]] = set()
    while queue:
        _, cost, cells = heapq.heappop(queue)
        if cells in closed:
            continue
        if cells == goal:
            plan = [cells]
            while plan[-1] != start:
                plan.append(parent[plan[-1]])
            return cost, np.array(plan[::-1], np.int32)
        closed.add(cells)
        if len(closed) > max_expansions:
            raise RuntimeError(f"optimal_cost: more than {max_expansions} expansions.")
        here = np.array(cells)
        proposed = move_to[here[None, :], joint]                      # [5^F, F]
        same = proposed[:, :, None] == proposed[:, None, :]
        swap = (proposed[:, :, None] == here[None, None, :]) & (
            proposed[:, None, :] == here[None, :, None])
        ok = ~np.any((same | swap) & off_diagonal, axis=(1, 2))
        new_cost = cost + float(np.sum(here != np.array(goal)))
        for nxt in {tuple(int(c) for c in row) for row in proposed[ok]}:
            if nxt not in closed and new_cost < best.get(nxt, np.inf):
                best[nxt] = new_cost
                parent[nxt] = cells
                heapq.heappush(queue, (new_cost + estimate(nxt), new_cost, nxt))
    raise RuntimeError("optimal_cost: the goal is unreachable.")


def plan_moves(instances: Instances, index: int, plan: np.ndarray) -> np.ndarray:
    """``[L]`` int32 joint move ids that take ``plan [L + 1, F]``'s states one to
    the next on instance ``index`` (``stay`` where an agent does not move)."""
    move_to = instances.move_to[index]
    ids = []
    for here, there in zip(plan[:-1], plan[1:], strict=True):
        moves = [int(np.flatnonzero(move_to[c] == n)[0]) for c, n in zip(here, there,
                                                                          strict=True)]
        ids.append(int(np.ravel_multi_index(moves, (NUM_MOVES,) * len(moves))))
    return np.array(ids, np.int32)
