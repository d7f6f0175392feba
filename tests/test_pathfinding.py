"""The path-finding model and its exact planner (:mod:`jaxpuct.testing.pathfinding`).

A* against uniform-cost search (the same optimum without the heuristic), and A*'s
optimal plans replayed through the JAX dynamics the searches use (same states,
same cost), with a swap and a vertex collision voided. NumPy and one small jit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import search_cases as sc

from jaxpuct.testing import pathfinding as pf

_step = sc.jit(pf.step)


def test_a_star_is_optimal_and_its_plans_replay_in_the_jax_model():
    inst = pf.make_instances(6, size=4, num_agents=3, num_obstacles=2, seed=1)
    agents = np.arange(3)
    cells, index, actions, costs, last = [], [], [], [], []
    interacting = 0
    for i in range(6):
        cost, plan = pf.optimal_cost(inst, i)
        assert cost == pf.optimal_cost(inst, i, heuristic=False)[0]
        lower = inst.distance[i][agents, inst.start[i]].sum()
        assert cost >= lower
        interacting += cost > lower
        np.testing.assert_array_equal(plan[0], inst.start[i])
        np.testing.assert_array_equal(plan[-1], inst.goal[i])
        moves = pf.plan_moves(inst, i, plan)
        cells.append(plan[:-1])
        index.append(np.full(len(moves), i))
        actions.append(moves)
        costs.append(cost)
        last.append(np.arange(len(moves)) == len(moves) - 1)
    assert interacting > 0  # some instance needs the agents to give way
    # Two collisions on instance 0: agents 0 and 1 swap neighbouring cells, and
    # agent 0 moves onto agent 1, who stays. Both joint moves are void.
    move_to = inst.move_to[0]
    here = int(np.flatnonzero(inst.legal[0, :, 3])[0])  # a cell with an east neighbour
    east = int(move_to[here, 3])
    other = next(c for c in range(move_to.shape[0])
                 if c not in (here, east) and inst.legal[0, c, 0] and inst.distance[0, 0, c] < 64)
    collisions = np.array([[here, east, other], [here, east, other]], np.int32)
    colliding = np.array([np.ravel_multi_index((3, 4, 0), (5, 5, 5)),
                          np.ravel_multi_index((3, 0, 0), (5, 5, 5))])
    state = pf.State(cells=jnp.asarray(np.concatenate(cells + [collisions])),
                     instance=jnp.asarray(np.concatenate(index + [[0, 0]]), jnp.int32))
    new, step_cost, done = jax.device_get(_step(inst, state, jnp.asarray(
        np.concatenate(actions + [colliding]), jnp.int32)))
    steps = sum(len(a) for a in actions)
    expected_next = np.concatenate([pf.optimal_cost(inst, i)[1][1:] for i in range(6)])
    np.testing.assert_array_equal(new.cells[:steps], expected_next)
    np.testing.assert_array_equal(new.cells[steps:], collisions)
    np.testing.assert_array_equal(done[:steps], np.concatenate(last))
    assert not done[steps:].any()
    bounds = np.cumsum([0] + [len(a) for a in actions])
    got = [step_cost[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    np.testing.assert_array_equal(got, costs)
    goal = inst.goal[0]
    np.testing.assert_array_equal(step_cost[steps:], np.sum(collisions != goal, -1))
