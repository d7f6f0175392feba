"""Pictures of a search tree: Graphviz DOT text, and a renderer.

:func:`to_dot` writes one tree of the batch as Graphviz DOT text (the format is
documented at https://graphviz.org/doc/info/lang.html): a box per node with its
visit count ``N`` and value ``Q`` (from the view of the player to move there), an
arrow per edge with the action, the edge visit count, the prior ``P`` and the edge
value ``Q(n, a) = r + discount * Q(child)`` (from the view of the player who
moves). Terminal nodes are grey, transpositions (graph search: a node with more
than one incoming edge) blue, and a node proven by the MCTS-solver
(``Tree.proof_plies``, or a ``proven`` field of another solver) shows it. It reads
the tree from the device once, with one ``jax.device_get`` of the rows of the
chosen tree, and is NumPy afterwards.

:func:`render` draws DOT text to SVG, PNG or PDF with Graphviz's ``dot`` program
when it is installed, and with matplotlib otherwise (a simple layered layout; only
the DOT that :func:`to_dot` writes is understood). mctx's visualization demo
(``mctx/examples/visualization_demo.py``) draws its trees with pygraphviz;
writing the DOT text ourselves keeps ``jaxpuct`` free of that dependency.

Neither function is imported by ``import jaxpuct``; matplotlib is imported only
when the fallback draws.
"""

from __future__ import annotations

import collections
import dataclasses
import operator
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxpuct import validation

__all__ = ["render", "to_dot"]

_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
_ENGINES = ("auto", "dot", "matplotlib")
_TERMINAL_COLOR = "lightgray"
_TRANSPOSITION_COLOR = "lightblue"
_PROVEN_COLOR = "gold"


# --------------------------------------------------------------------------------------
# Tree -> DOT
# --------------------------------------------------------------------------------------


def _check_index(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high)`` (``high=None``: no upper bound)."""
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an int, got {value!r}") from None
    if value < low or (high is not None and value >= high):
        expected = f">= {low}" if high is None else f"in [{low}, {high})"
        raise ValueError(f"{name} must be {expected}, got {value}")
    return value


def _host_rows(tree: Any, index: int) -> dict[str, np.ndarray]:
    """The rows of tree ``index`` that the picture needs, read in one transfer."""
    names = ["node_visits", "node_values", "node_rewards", "node_discounts",
             "node_terminal", "children_index", "children_prior", "edge_visits",
             "num_nodes"]
    for optional in ("edge_rewards", "edge_discounts", "proven", "proof_plies"):
        if getattr(tree, optional, None) is not None:
            names.append(optional)
    return jax.device_get({name: getattr(tree, name)[index] for name in names})


def _escape(text: str) -> str:
    """A DOT double-quoted string body (quotes and backslashes escaped)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _label(lines: Sequence[str]) -> str:
    # ``\\n`` is DOT's centred line break inside a quoted label.
    return "\\n".join(_escape(line) for line in lines)


@dataclasses.dataclass(frozen=True)
class _Shown:
    """What survives the filters: nodes in breadth-first order, edges as
    ``(parent, action, child)`` in the order they are drawn."""

    nodes: tuple[int, ...]
    edges: tuple[tuple[int, int, int], ...]


def _select(children: np.ndarray, edge_visits: np.ndarray, max_depth: int | None,
            top_k: int | None, min_visits: int) -> _Shown:
    """Breadth-first walk from the root over the edges that pass the filters.

    ``children`` and ``edge_visits`` are ``[N, A]``. A node's edges are ordered by
    visits (then action); those with fewer than ``min_visits`` visits are dropped,
    then all but the ``top_k`` first. Nodes at depth ``max_depth`` (the root is at
    depth 0; in a graph, the shortest depth) show no edges. A stricter filter
    keeps a subset of the edges at every node, so it shows a subset of the nodes.
    """
    depth = {0: 0}
    order = [0]
    edges = []
    queue = collections.deque([0])
    while queue:
        node = queue.popleft()
        if max_depth is not None and depth[node] >= max_depth:
            continue
        actions = [a for a in np.flatnonzero(children[node] >= 0)
                   if edge_visits[node, a] >= min_visits]
        actions.sort(key=lambda a: (-int(edge_visits[node, a]), int(a)))
        if top_k is not None:
            actions = actions[:top_k]
        for action in actions:
            child = int(children[node, action])
            edges.append((node, int(action), child))
            if child not in depth:
                depth[child] = depth[node] + 1
                order.append(child)
                queue.append(child)
    return _Shown(nodes=tuple(order), edges=tuple(edges))


def _in_degree(children: np.ndarray, num_nodes: int) -> np.ndarray:
    """``[N]`` number of stored edges into each node (over the used nodes)."""
    targets = children[:num_nodes]
    targets = targets[targets >= 0]
    return np.bincount(targets, minlength=children.shape[0])


def _edge_q(rows: dict[str, np.ndarray], node: int, action: int, child: int) -> float:
    """``Q(n, a) = r + discount * Q(child)``, with the edge's own reward and
    discount when the tree stores them (graph search), else the child's."""
    if "edge_rewards" in rows:
        reward = rows["edge_rewards"][node, action]
        discount = rows["edge_discounts"][node, action]
    else:
        reward = rows["node_rewards"][child]
        discount = rows["node_discounts"][child]
    return float(reward + discount * rows["node_values"][child])


def _number(x: float, digits: int) -> str:
    """``x`` to ``digits`` decimals, never as ``-0.000``."""
    return f"{round(float(x), digits) + 0.0:.{digits}f}"


def _node_line(rows: dict[str, np.ndarray], node: int, in_degree: np.ndarray) -> str:
    lines = [f"#{node}", f"N={int(rows['node_visits'][node])} "
                         f"Q={_number(rows['node_values'][node], 3)}"]
    color = None
    if rows["node_terminal"][node]:
        lines.append("terminal")
        color = _TERMINAL_COLOR
    if in_degree[node] > 1:
        lines.append(f"transposition ({int(in_degree[node])} parents)")
        color = _TRANSPOSITION_COLOR
    if "proven" in rows and rows["proven"][node]:
        # A hook for a solver's field: shown as stored, without reading meaning
        # into its sign.
        lines.append(f"proven={rows['proven'][node].item():+g}")
        color = _PROVEN_COLOR
    if "proof_plies" in rows and rows["proof_plies"][node] >= 0:
        # jaxpuct.solver: Q above is the exact value.
        lines.append(f"proven in {int(rows['proof_plies'][node])} plies")
        color = _PROVEN_COLOR
    attrs = f'label="{_label(lines)}"'
    if color is not None:
        attrs += f", fillcolor={color}"
    return f"  n{node} [{attrs}];"


def to_dot(tree: Any, index: int = 0, *, action_labels: Sequence[str] | None = None,
           max_depth: int | None = None, top_k: int | None = None,
           min_visits: int = 0) -> str:
    """Graphviz DOT text of tree ``index`` of a batch.

    Args:
      tree: a :class:`jaxpuct.Tree` (node arrays ``[B, N]``, edge arrays
        ``[B, N, A]``), e.g. ``policy_output.search_tree``. An optional
        ``proven`` field ``[B, N]`` is shown where it is non-zero, and the
        solver's ``proof_plies`` where a node is proven.
      index: which tree of the batch, ``0 <= index < B``.
      action_labels: ``A`` names for the actions (default: the action numbers).
      max_depth: show nodes down to this depth (the root is depth 0).
      top_k: at each node, show only the ``top_k`` most visited edges.
      min_visits: show only edges with at least this many visits ``N(n, a)``.

    Returns:
      DOT text: one ``nK`` node per shown node slot ``K`` (breadth-first from the
      root) and one ``nI -> nJ`` line per shown edge. Edge widths grow with the
      visits. Stricter filters show a subset of the nodes.

    Raises:
      ValueError: naming the argument, for an ``index`` out of range, labels of
        the wrong length, or a negative depth, ``top_k < 1`` or ``min_visits < 0``;
        for an object that is not a tree (a ``PolicyOutput``: pass its
        ``.search_tree``; an mctx tree) or a tree traced under ``jax.jit`` (the
        picture is made on the host: call it on the tree the jitted function returns).
    """
    validation.check_tree_object("tree", tree, structural=True, concrete=True)
    batch_size, num_actions = tree.batch_size, tree.num_actions
    index = _check_index("index", index, 0, batch_size)
    if max_depth is not None:
        max_depth = _check_index("max_depth", max_depth, 0)
    if top_k is not None:
        top_k = _check_index("top_k", top_k, 1)
    min_visits = _check_index("min_visits", min_visits, 0)
    if action_labels is None:
        action_labels = [str(a) for a in range(num_actions)]
    elif len(action_labels) != num_actions:
        raise ValueError(f"action_labels must have {num_actions} entries (one per "
                         f"action), got {len(action_labels)}")

    rows = _host_rows(tree, index)
    children = rows["children_index"]
    num_nodes = int(rows["num_nodes"])
    shown = _select(children, rows["edge_visits"], max_depth, top_k, min_visits)
    in_degree = _in_degree(children, num_nodes)
    # Widths relative to the busiest edge of the tree, so pictures of one tree
    # under different filters agree.
    busiest = max(1, int(rows["edge_visits"][:num_nodes].max(initial=0)))

    out = [
        "digraph tree {",
        '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica];',
        "  edge [fontname=Helvetica, fontsize=10];",
    ]
    out.extend(_node_line(rows, node, in_degree) for node in shown.nodes)
    for node, action, child in shown.edges:
        visits = int(rows["edge_visits"][node, action])
        lines = [f"{action_labels[action]}",
                 f"N={visits} P={_number(rows['children_prior'][node, action], 2)}",
                 f"Q={_number(_edge_q(rows, node, action, child), 3)}"]
        width = 1.0 + 3.0 * visits / busiest
        out.append(f'  n{node} -> n{child} [label="{_label(lines)}", penwidth={width:.2f}];')
    out.append("}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------
# DOT -> picture
# --------------------------------------------------------------------------------------

_NODE_RE = re.compile(r"^\s*(n\d+) \[(.*)\];\s*$")
_EDGE_RE = re.compile(r"^\s*(n\d+) -> (n\d+) \[(.*)\];\s*$")
_ATTR_RE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\s]+)')


def _attributes(text: str) -> dict[str, str]:
    """``key=value`` pairs of a DOT attribute list, labels unescaped."""
    out = {}
    for key, value in _ATTR_RE.findall(text):
        if value.startswith('"'):
            value = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1),
                           value[1:-1])
        out[key] = value
    return out


@dataclasses.dataclass(frozen=True)
class _Graph:
    """Parsed DOT: node id -> attributes (in file order), edges with attributes."""

    nodes: dict[str, dict[str, str]]
    edges: tuple[tuple[str, str, dict[str, str]], ...]


def _parse(dot_text: str) -> _Graph:
    nodes: dict[str, dict[str, str]] = {}
    edges = []
    for line in dot_text.splitlines():
        if match := _EDGE_RE.match(line):
            edges.append((match.group(1), match.group(2), _attributes(match.group(3))))
        elif match := _NODE_RE.match(line):
            nodes[match.group(1)] = _attributes(match.group(2))
    if not nodes:
        raise ValueError("dot_text must be DOT text written by jaxpuct.visualize.to_dot "
                         "(nodes 'nK [...];'), got none")
    return _Graph(nodes=nodes, edges=tuple(edges))


def _layout(graph: _Graph) -> dict[str, tuple[float, float]]:
    """Layered positions: depth down, leaves side by side in depth-first order,
    each parent centred over its children (in a graph, over the children it
    reached first)."""
    root = next(iter(graph.nodes))
    kids: dict[str, list[str]] = {name: [] for name in graph.nodes}
    depth = {root: 0}
    queue = collections.deque([root])
    out_edges = collections.defaultdict(list)
    for parent, child, _ in graph.edges:
        out_edges[parent].append(child)
    while queue:
        node = queue.popleft()
        for child in out_edges[node]:
            if child in kids and child not in depth:
                depth[child] = depth[node] + 1
                kids[node].append(child)
                queue.append(child)
    x: dict[str, float] = {}
    next_leaf = 0.0

    def place(node: str) -> float:
        nonlocal next_leaf
        if not kids[node]:
            x[node] = next_leaf
            next_leaf += 1.0
        else:
            x[node] = float(np.mean([place(child) for child in kids[node]]))
        return x[node]

    place(root)
    # Nodes that no edge from the root reaches (not written by to_dot) go last.
    for node in graph.nodes:
        if node not in depth:
            depth[node], x[node] = 0, next_leaf
            next_leaf += 1.0
    return {node: (x[node], -float(depth[node])) for node in graph.nodes}


def _draw_matplotlib(graph: _Graph, path: Path, fmt: str) -> None:
    # Imported here only: ``jaxpuct.visualize`` must not need matplotlib when
    # Graphviz draws, and ``import jaxpuct`` must never load it.
    try:
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("render needs Graphviz's dot program or matplotlib: install "
                          "one (pip install 'jaxpuct[examples]' brings matplotlib)") from err

    position = _layout(graph)
    xs = [p[0] for p in position.values()]
    ys = [p[1] for p in position.values()]
    width = max(4.0, 1.6 * (max(xs) - min(xs) + 1))
    height = max(3.0, 1.5 * (max(ys) - min(ys) + 1))
    figure = Figure(figsize=(width, height))
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_axis_off()
    for parent, child, attrs in graph.edges:
        (x0, y0), (x1, y1) = position[parent], position[child]
        axes.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=1,
                      arrowprops=dict(arrowstyle="->", color="0.35",
                                      lw=float(attrs.get("penwidth", 1.0)),
                                      shrinkA=18, shrinkB=18))
        axes.text((x0 + x1) / 2, (y0 + y1) / 2, attrs.get("label", ""), fontsize=6,
                  ha="center", va="center", color="0.2", zorder=2,
                  bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8))
    for node, attrs in graph.nodes.items():
        x, y = position[node]
        axes.text(x, y, attrs.get("label", node), fontsize=7, ha="center", va="center",
                  zorder=3, bbox=dict(boxstyle="round,pad=0.3",
                                      fc=attrs.get("fillcolor", "white"), ec="black"))
    axes.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    axes.set_ylim(min(ys) - 0.5, max(ys) + 0.5)
    figure.savefig(path, format=fmt, dpi=150)


def render(dot_text: str, path: str | Path, *, engine: str = "auto") -> str:
    """Draws DOT text to ``path`` (``.svg``, ``.png`` or ``.pdf``).

    Args:
      dot_text: DOT text, e.g. from :func:`to_dot`.
      path: the output file; its suffix picks the format.
      engine: ``"dot"`` (Graphviz's ``dot`` program, which must be on ``PATH``),
        ``"matplotlib"`` (a layered drawing; reads only :func:`to_dot`'s DOT), or
        ``"auto"``: ``dot`` when installed, else matplotlib.

    Returns:
      The engine that drew: ``"dot"`` or ``"matplotlib"``.

    Raises:
      ValueError: for another suffix or engine, or text with no node.
      FileNotFoundError: ``engine="dot"`` without the ``dot`` program.
      ImportError: the fallback without matplotlib.
      subprocess.CalledProcessError: ``dot`` rejected the text (its message is in
        ``stderr``).
    """
    path = Path(path)
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"path must end in one of {', '.join(_FORMATS)}, got {str(path)!r}")
    if engine not in _ENGINES:
        raise ValueError(f"engine must be one of {', '.join(_ENGINES)}, got {engine!r}")
    dot = shutil.which("dot")
    if engine == "dot" and dot is None:
        raise FileNotFoundError("engine='dot' needs Graphviz's dot program on PATH "
                                "(https://graphviz.org/download/)")
    if dot is not None and engine in ("dot", "auto"):
        subprocess.run([dot, f"-T{fmt}", "-o", str(path)], input=dot_text, text=True,
                       check=True, capture_output=True)
        return "dot"
    _draw_matplotlib(_parse(dot_text), path, fmt)
    return "matplotlib"
