"""jaxpuct.memory: the tree-memory calculator against sizes counted by hand."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpuct
from jaxpuct.memory import GIB, tree_memory, trees_that_fit

# Per node, by hand: visits, raw value, value, reward, discount (4 bytes each),
# terminal (1 byte); per edge: child index, prior, edge visits (4 bytes each).
NODE_BYTES = 5 * 4 + 1
EDGE_BYTES = 3 * 4


def test_bytes_per_node_and_per_tree_by_hand():
    a, n = 3, 7
    memory = tree_memory(a, n)
    assert memory.bytes_per_node == NODE_BYTES + a * EDGE_BYTES  # 57
    # The tree adds its [A] float32 root prior and int32 node count.
    assert memory.bytes_per_tree == n * 57 + 4 * a + 4


def test_embedding_and_graph_arrays_are_counted():
    a, n = 4, 5
    embedding = {"board": jax.ShapeDtypeStruct((9,), jnp.int8),
                 "player": jax.ShapeDtypeStruct((), jnp.int32)}
    plain = tree_memory(a, n, embedding=embedding)
    assert plain.bytes_per_node == NODE_BYTES + a * EDGE_BYTES + 9 + 4
    graph = tree_memory(a, n, graph=jaxpuct.GraphConfig(table_factor=2))
    # Hash [2] uint32, edge rewards and discounts [A] float32, and a table of the
    # next power of two >= 2 * N int32 slots (16 for N = 5).
    extra_per_node = 8 + 2 * 4 * a
    assert graph.bytes_per_tree == n * (NODE_BYTES + a * EDGE_BYTES + extra_per_node) \
        + 16 * 4 + 4 * a + 4


def test_bytes_per_tree_is_the_size_of_a_real_batch():
    batch, a, n = 5, 6, 9
    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((batch, a)), value=jnp.zeros((batch,)),
                                embedding=jnp.zeros((batch, 3), jnp.float32))
    tree = jax.jit(jaxpuct.init_tree, static_argnums=1)(root, n)  # one compile, not many ops
    actual = sum(x.nbytes for x in jax.tree.leaves(tree))
    memory = tree_memory(a, n, embedding=jax.ShapeDtypeStruct((3,), jnp.float32))
    assert actual == batch * memory.bytes_per_tree
    assert memory.bytes_per_node == sum(tree.bytes_per_node().values())


def test_trees_that_fit_is_the_floor_of_the_ratio():
    a, n = 82, 801
    per_tree = tree_memory(a, n).bytes_per_tree
    assert per_tree == n * (NODE_BYTES + a * EDGE_BYTES) + 4 * a + 4
    assert trees_that_fit(16 * GIB, a, n) == 16 * GIB // per_tree
    assert trees_that_fit(16 * GIB, a, n, fraction=0.5) == 8 * GIB // per_tree
    assert trees_that_fit(per_tree - 1, a, n) == 0
    assert trees_that_fit(per_tree, a, n) == 1
    assert np.isclose(trees_that_fit(80 * GIB, a, n) / trees_that_fit(16 * GIB, a, n), 5,
                      rtol=1e-4)


@pytest.mark.parametrize("kwargs, match", [
    (dict(device_bytes=0, num_actions=3, max_nodes=4), "device_bytes"),
    (dict(device_bytes=10, num_actions=0, max_nodes=4), "num_actions"),
    (dict(device_bytes=10, num_actions=3, max_nodes=2.5), "max_nodes"),
    (dict(device_bytes=10, num_actions=3, max_nodes=4, fraction=1.5), "fraction"),
])
def test_bad_arguments_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        trees_that_fit(**kwargs)


def test_the_table_in_docs_scaling_is_what_the_calculator_says():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "scaling.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (\d+) \| (no|yes) \| (0|pgx go_9x9 \(\d+\)) \| "
                      r"(\d+) \| ([\d.]+) \| (\d+) \| (\d+) \| (\d+) \|$", doc, re.M)
    assert len(rows) == 5
    for a, n, graph, embedding, per_node, mib, *fits in rows:
        a, n = int(a), int(n)
        kwargs = dict(graph=jaxpuct.GraphConfig() if graph == "yes" else None)
        if embedding != "0":
            # The pgx Go state's size, as the row states it, stands in for pgx.
            size = int(re.search(r"\((\d+)\)", embedding).group(1))
            kwargs["embedding"] = jax.ShapeDtypeStruct((size,), jnp.uint8)
        memory = tree_memory(a, n, **kwargs)
        assert memory.bytes_per_node == int(per_node)
        assert f"{memory.bytes_per_tree / 2**20:.2f}" == mib
        assert [trees_that_fit(g * GIB, a, n, **kwargs) for g in (16, 80, 141)] == \
            [int(f) for f in fits]


# ------------------------------------------------------------------ trees that cannot fit


def test_check_trees_fit_raises_with_the_bytes_needed_and_the_batch_that_fits():
    from jaxpuct.memory import check_trees_fit

    per_tree = tree_memory(3, 7).bytes_per_tree
    check_trees_fit(4, 3, 7, device_bytes=4 * per_tree)  # exactly fits
    with pytest.raises(ValueError) as info:
        check_trees_fit(5, 3, 7, device_bytes=4 * per_tree)
    message = str(info.value)
    for word in (f"{5 * per_tree:,} bytes", "B=5", "max_nodes=7", f"{4 * per_tree:,} bytes",
                 "jaxpuct.memory.trees_that_fit", "(4 here)"):
        assert word in message, (word, message)
    assert trees_that_fit(4 * per_tree, 3, 7) == 4


def test_check_trees_fit_does_nothing_where_the_memory_is_unknown(monkeypatch):
    from jaxpuct import memory

    monkeypatch.setattr(memory, "device_memory_bytes", lambda: None)
    memory.check_trees_fit(10**6, 362, 10**6)


def test_a_search_too_big_for_the_device_fails_before_compiling(monkeypatch):
    from jaxpuct import memory

    # An 80 GiB device (the figure is injected: on CPU the memory is unknown).
    monkeypatch.setattr(memory, "device_memory_bytes", lambda: 80 * GIB)
    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((2, 3)), value=jnp.zeros(2),
                                embedding=jnp.zeros((2,), jnp.int32))

    def recurrent_fn(params, key, action, state):
        raise AssertionError("never traced: the check comes first")

    with pytest.raises(ValueError, match=r"need [\d,]+ bytes .*max_nodes=1000000001"):
        jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root, recurrent_fn, 10**9)
    # What fits is searched as before.
    monkeypatch.setattr(memory, "device_memory_bytes", lambda: GIB)
    jaxpuct.init_tree(root, 100)
