#!/usr/bin/env bash
# The wheel installs alone: builds the sdist and the wheel (the wheel from the
# sdist, so a file missing from the sdist breaks the build), lists what the sdist
# holds for the tests, then in clean virtual environments under a temporary folder
#   1. the wheel with its core dependencies only (no Flax, no optax) runs the README's
#      quickstart, and jaxpuct.alphazero then names the `train` extra;
#   2. the wheel with the `examples` extra runs one iteration of examples/demo.py,
#      taken from the unpacked sdist (examples/ is not part of the package) and run
#      from a folder without the package's source, so the installed wheel is used.
# Not part of `make test`: it downloads and installs JAX and friends twice.
#   bash tools/check_wheel.sh            # PYTHON=python3.11 to choose the interpreter
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/jaxpuct-wheel.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
step() { echo "== [${SECONDS}s] $*"; }
# pip and build print pages of notices; keep them in a log, shown when a step fails.
quiet() { "$@" >>"$WORK/install.log" 2>&1 || { tail -40 "$WORK/install.log"; exit 1; }; }

step "build sdist and wheel into $WORK/dist"
"$PYTHON" -m venv "$WORK/build-env"
quiet "$WORK/build-env/bin/pip" install build
quiet "$WORK/build-env/bin/python" -m build --outdir "$WORK/dist" .
ls "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/jaxpuct-*.whl)
SDIST=$(ls "$WORK"/dist/jaxpuct-*.tar.gz)

step "the sdist holds what the tests need"
mkdir "$WORK/sdist"
tar -xzf "$SDIST" -C "$WORK/sdist" --strip-components=1
for path in pyproject.toml README.md Makefile mkdocs.yml .ci/run tests/conftest.py \
        tests/search_cases.py tests/test_guide.py tests/test_docs_site.py \
        docs/guide/README.md docs/tree_picture.png examples/demo.py examples/selfplay.py \
        benchmarks/__init__.py tools/docs_hooks.py tools/docs_griffe.py; do
    test -e "$WORK/sdist/$path" || { echo "missing from the sdist: $path"; exit 1; }
done
missing=$(comm -13 <(cd "$WORK/sdist" && find tests examples benchmarks docs tools -type f \
    | sort) <(git ls-files tests examples benchmarks docs tools | sort))
if [ -n "$missing" ]; then echo "tracked but missing from the sdist:"; echo "$missing"; exit 1; fi
echo "$(tar -tzf "$SDIST" | wc -l) entries; every tracked file of tests/ examples/ benchmarks/ docs/ tools/"

step "wheel alone (core dependencies): the README quickstart"
"$PYTHON" -m venv "$WORK/core"
quiet "$WORK/core/bin/pip" install "$WHEEL"
# The first ```python block after '## Quickstart' in the README.
awk '/^## Quickstart/{q=1} q&&/^```python/{p=1;next} p&&/^```/{exit} p' README.md \
    > "$WORK/quickstart.py"
(cd "$WORK" && core/bin/python -c "import jaxpuct, sys; \
    assert 'site-packages' in jaxpuct.__file__, jaxpuct.__file__; print(jaxpuct.__version__)" \
    && core/bin/python quickstart.py | tee quickstart.out)
grep -qx '\[2 2 2 2\]' "$WORK/quickstart.out"
# The core install has no Flax: the training subpackage names the extra to install.
(cd "$WORK" && core/bin/python -c "import importlib.util as u; \
    assert u.find_spec('flax') is None and u.find_spec('optax') is None, 'flax/optax in core'
try:
    import jaxpuct.alphazero
except ImportError as err:
    assert 'jaxpuct[train]' in str(err), err
    print('without the train extra:', err)
else:
    raise SystemExit('jaxpuct.alphazero imported without flax')")

step "wheel + examples extra: examples/demo.py, one iteration"
"$PYTHON" -m venv "$WORK/examples-env"
quiet "$WORK/examples-env/bin/pip" install "$WHEEL[examples]"
mkdir "$WORK/run" && cp -r "$WORK/sdist/examples" "$WORK/run/examples"
# An untrained agent loses to minimax, so the demo's exit status is 1 after one
# iteration; what is checked is that the iteration and the final evaluation ran.
(cd "$WORK/run" && ../examples-env/bin/python -c "import jaxpuct, sys; \
    assert 'site-packages' in jaxpuct.__file__, jaxpuct.__file__" \
    && { ../examples-env/bin/python -m examples.demo --iterations 1 \
    --run-dir "$WORK/run/demo" > demo.out 2>&1 || true; })
tail -5 "$WORK/run/demo.out"
grep -q '^Final evaluation at iteration 1 ' "$WORK/run/demo.out"
grep -q '^Losses against minimax' "$WORK/run/demo.out"
step "ok: the wheel installs alone"
