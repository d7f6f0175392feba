"""jaxpuct.visualize: DOT text against a hand-written golden file and NumPy counts;
the renderer's Graphviz path (mocked: ``dot`` is not installed on the test machine,
and the call is checked, not its picture) and its matplotlib fallback (run)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import tree_picture
from jaxpuct import visualize
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree

NODE_LINE = re.compile(r"^  n(\d+) \[label=", re.M)
EDGE_LINE = re.compile(r"^  n(\d+) -> n(\d+) ", re.M)


def _tree(children, *, visits=None, values=None, rewards=None, discounts=None,
          terminal=None, prior=None, edge_visits=None, graph=False) -> Tree:
    """A one-tree batch from NumPy rows: ``children [N, A]`` and node rows ``[N]``."""
    children = np.asarray(children, np.int32)
    n, a = children.shape

    def row(x, fill, dtype, shape=(n,)):
        return jnp.asarray(np.full(shape, fill, dtype) if x is None else np.asarray(x, dtype))[None]

    return Tree(
        node_visits=row(visits, 1, np.int32),
        raw_values=row(values, 0.0, np.float32),
        node_values=row(values, 0.0, np.float32),
        node_rewards=row(rewards, 0.0, np.float32),
        node_discounts=row(discounts, -1.0, np.float32),
        node_terminal=row(terminal, False, bool),
        embeddings=jnp.zeros((1, n)),
        children_index=jnp.asarray(children)[None],
        children_prior=row(prior, 1.0 / a, np.float32, (n, a)),
        edge_visits=row(edge_visits, 1, np.int32, (n, a)),
        root_prior=row(None, 1.0 / a, np.float32, (a,)),
        num_nodes=jnp.asarray([n], jnp.int32),
        node_hash=jnp.zeros((1, n, 2), jnp.uint32) if graph else None,
    )


GOLDEN = r"""digraph tree {
  node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica];
  edge [fontname=Helvetica, fontsize=10];
  n0 [label="#0\nN=3 Q=0.500"];
  n1 [label="#1\nN=2 Q=-0.250"];
  n2 [label="#2\nN=1 Q=0.000\nterminal", fillcolor=lightgray];
  n0 -> n1 [label="a\nN=2 P=0.60\nQ=0.250", penwidth=4.00];
  n0 -> n2 [label="c\nN=1 P=0.40\nQ=1.000", penwidth=2.50];
}
"""


def _three_nodes() -> Tree:
    """Root with children by actions 0 (a non-terminal node) and 2 (a win: reward
    1, terminal); action 1 illegal."""
    return _tree(
        [[1, ILLEGAL, 2], [UNEXPANDED] * 3, [ILLEGAL] * 3],
        visits=[3, 2, 1], values=[0.5, -0.25, 0.0], rewards=[0.0, 0.0, 1.0],
        discounts=[0.0, -1.0, 0.0], terminal=[False, False, True],
        prior=[[0.6, 0.0, 0.4], [1 / 3] * 3, [0.0] * 3],
        edge_visits=[[2, 0, 1], [0, 0, 0], [0, 0, 0]])


def test_golden_dot_of_a_three_node_tree():
    assert visualize.to_dot(_three_nodes(), action_labels=["a", "b", "c"]) == GOLDEN


def _random_tree(rng: np.random.Generator, n: int, a: int, extra_edges: int = 0):
    """A random tree of ``n`` nodes (node ``i`` hangs under an earlier node), with
    ``extra_edges`` more edges into existing non-root nodes (a graph). Returns the
    tree and each node's depth in the tree part."""
    children = np.full((n, a), UNEXPANDED, np.int32)
    children[rng.random((n, a)) < 0.1] = ILLEGAL
    depth = np.zeros(n, np.int64)
    for child in range(1, n):
        while True:
            parent = int(rng.integers(child))
            free = np.flatnonzero(children[parent] == UNEXPANDED)
            if free.size:
                break
        children[parent, rng.choice(free)] = child
        depth[child] = depth[parent] + 1
    for _ in range(extra_edges):
        parent = int(rng.integers(n))
        free = np.flatnonzero(children[parent] == UNEXPANDED)
        if free.size:
            children[parent, rng.choice(free)] = int(rng.integers(1, n))
    tree = _tree(children, visits=rng.integers(1, 20, n), values=rng.normal(size=n),
                 edge_visits=rng.integers(0, 6, (n, a)), graph=extra_edges > 0)
    return tree, children, depth


def _shown(dot: str) -> tuple[set[int], list[tuple[int, int]]]:
    nodes = {int(m) for m in NODE_LINE.findall(dot)}
    edges = [(int(p), int(c)) for p, c in EDGE_LINE.findall(dot)]
    return nodes, edges


@pytest.mark.parametrize("seed", range(4))
def test_counts_on_random_trees_equal_numpy_counts(seed):
    rng = np.random.default_rng(seed)
    tree, children, depth = _random_tree(rng, n=40, a=5)
    nodes, edges = _shown(visualize.to_dot(tree))
    assert nodes == set(range(40))
    assert len(edges) == np.sum(children >= 0)
    for max_depth in (0, 1, 3):
        nodes, edges = _shown(visualize.to_dot(tree, max_depth=max_depth))
        assert nodes == set(np.flatnonzero(depth <= max_depth))
        parents = np.nonzero(children >= 0)[0]
        assert len(edges) == np.sum(depth[parents] < max_depth)


@pytest.mark.parametrize("seed", range(3))
def test_stricter_filters_show_subsets(seed):
    rng = np.random.default_rng(100 + seed)
    tree, _, _ = _random_tree(rng, n=60, a=6, extra_edges=10 * seed)
    loose = [dict(), dict(max_depth=4), dict(top_k=3), dict(min_visits=1),
             dict(top_k=3, min_visits=1, max_depth=5)]
    strict = [dict(max_depth=2), dict(max_depth=1), dict(top_k=1), dict(min_visits=3),
              dict(top_k=2, min_visits=2, max_depth=3)]
    for looser, stricter in zip(loose, strict, strict=True):
        big, _ = _shown(visualize.to_dot(tree, **looser))
        small, _ = _shown(visualize.to_dot(tree, **stricter))
        assert small <= big, (looser, stricter)
    top1, edges1 = _shown(visualize.to_dot(tree, top_k=1))
    assert len(edges1) == len(top1) - 1 or tree.is_graph  # a single path in a tree


def test_min_visits_and_top_k_pick_the_most_visited_edges():
    tree = _tree([[1, 2, 3], [ILLEGAL] * 3, [ILLEGAL] * 3, [ILLEGAL] * 3],
                 edge_visits=[[2, 5, 3], [0] * 3, [0] * 3, [0] * 3])
    assert _shown(visualize.to_dot(tree, top_k=2))[0] == {0, 2, 3}
    assert _shown(visualize.to_dot(tree, min_visits=3))[0] == {0, 2, 3}
    assert _shown(visualize.to_dot(tree, min_visits=3, top_k=1))[0] == {0, 2}


def _graph_search():
    """A graph search of a real position (the example's, which the last test draws)."""
    return tree_picture.search(SIMULATIONS, graph=True)


SIMULATIONS = 120


def test_graph_search_marks_exactly_the_nodes_with_several_parents():
    tree = _graph_search()
    children = np.asarray(tree.children_index[0, : int(tree.num_nodes[0])])
    parents = np.bincount(children[children >= 0], minlength=tree.max_nodes)
    dot = visualize.to_dot(tree)
    marked = {int(n): int(k) for n, k in
              re.findall(r"n(\d+) \[label=\"[^\"]*transposition \((\d+) parents\)", dot)}
    expected = {int(n): int(parents[n]) for n in np.flatnonzero(parents > 1)}
    assert expected, "the search found no transposition to mark"
    assert marked == expected
    # Every stored edge is drawn, once.
    assert len(_shown(dot)[1]) == np.sum(children >= 0)


def test_a_proven_field_is_shown_where_non_zero():
    base = _three_nodes()

    class WithProven:
        proven = jnp.asarray([[0, 1, -1]], jnp.int8)

        def __getattr__(self, name):
            return getattr(base, name)

    dot = visualize.to_dot(WithProven())
    assert "proven" not in dot.split("\n")[3]
    assert r"\nproven=+1" in dot and r"\nproven=-1" in dot


@pytest.mark.parametrize("kwargs, match", [
    (dict(index=1), r"index must be in \[0, 1\), got 1"),
    (dict(index=-1), "index"),
    (dict(index=0.5), "index must be an int"),
    (dict(action_labels=["a"]), "action_labels must have 3 entries"),
    (dict(max_depth=-1), "max_depth"),
    (dict(top_k=0), "top_k"),
    (dict(min_visits=-2), "min_visits"),
])
def test_bad_arguments_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        visualize.to_dot(_three_nodes(), **kwargs)


def test_render_uses_dot_when_installed(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(visualize.shutil, "which", lambda name: "/usr/bin/dot")
    monkeypatch.setattr(visualize.subprocess, "run",
                        lambda *args, **kwargs: calls.append((args, kwargs)))
    assert visualize.render(GOLDEN, tmp_path / "t.svg") == "dot"
    (command,), kwargs = calls[0]
    assert command == ["/usr/bin/dot", "-Tsvg", "-o", str(tmp_path / "t.svg")]
    assert kwargs["input"] == GOLDEN and kwargs["check"]


def test_render_refuses_dot_when_it_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(visualize.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="dot"):
        visualize.render(GOLDEN, tmp_path / "t.svg", engine="dot")


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_render_falls_back_to_matplotlib(monkeypatch, tmp_path, suffix, magic):
    monkeypatch.setattr(visualize.shutil, "which", lambda name: None)
    path = tmp_path / f"t{suffix}"
    assert visualize.render(GOLDEN, path) == "matplotlib"
    assert path.read_bytes().startswith(magic)


def test_fallback_draws_every_node_and_edge(tmp_path):
    graph = visualize._parse(GOLDEN)
    assert list(graph.nodes) == ["n0", "n1", "n2"]
    assert graph.nodes["n2"]["label"] == "#2\nN=1 Q=0.000\nterminal"
    assert [(p, c) for p, c, _ in graph.edges] == [("n0", "n1"), ("n0", "n2")]
    position = visualize._layout(graph)
    assert position["n0"] == (0.5, 0.0)
    assert position["n1"] == (0.0, -1.0) and position["n2"] == (1.0, -1.0)


@pytest.mark.parametrize("kwargs, error", [
    (dict(path="t.jpg"), ValueError), (dict(path="t.png", engine="gv"), ValueError)])
def test_render_bad_arguments(kwargs, error):
    with pytest.raises(error):
        visualize.render(GOLDEN, **kwargs)
    with pytest.raises(ValueError, match="dot_text"):
        visualize.render("graph {}", "t.png", engine="matplotlib")


def test_index_picks_one_tree_of_the_batch():
    rng = np.random.default_rng(5)
    (a, _, _), (b, _, _) = _random_tree(rng, 12, 4), _random_tree(rng, 12, 4)
    both = jax.tree.map(lambda x, y: jnp.concatenate([x, y]), a, b)
    assert visualize.to_dot(both, index=1) == visualize.to_dot(b)
    assert visualize.to_dot(both, index=0) == visualize.to_dot(a)
    assert visualize.to_dot(both, index=0) != visualize.to_dot(b)


def test_the_example_draws_a_real_search(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(visualize.shutil, "which", lambda name: None)
    out, dot = tmp_path / "tree.png", tmp_path / "tree.dot"
    tree_picture.main(["--simulations", str(SIMULATIONS), "--graph", "--out", str(out),
                       "--dot-out", str(dot)])
    assert out.read_bytes().startswith(b"\x89PNG")
    nodes, edges = _shown(dot.read_text())
    assert 0 in nodes and edges and "matplotlib" in capsys.readouterr().out
