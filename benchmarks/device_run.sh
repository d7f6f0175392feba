#!/usr/bin/env bash
# GPU benchmarks of jaxpuct against mctx, in one command with a fixed time budget.
#
#   benchmarks/device_run.sh            # on the GPU machine, from the repository root
#   benchmarks/device_run.sh --smoke    # (or SMOKE=1) tiny sizes on CPU, no installs
#   benchmarks/device_run.sh --fetch-wheels  # here, with a registry: mctx, pgx and
#                                       # svgwrite wheels into .whl for an offline machine
#
# Parts, each under its own `timeout` (a slow part cannot eat the others' time), each
# writing its results as they come:
#   a. benchmarks.compare_mctx --workloads grid: the search alone, GPU-sized B, S, A;
#   b. benchmarks.selfplay_step: a pgx self-play step, PUCT and Gumbel, vs mctx;
#   c. benchmarks.multileaf: several leaves per step, B = 1 and 8, K = 1, 4, 16;
#   d. benchmarks.max_batch: the largest B that fits (doubling until out of memory),
#      run last, since it fills the card;
#   e. benchmarks.kernels --time: the launch-cost model's six searches (docs/scaling.md)
#      timed at B = 1024 and 8, run before d.
# Then benchmarks.device_report writes $OUT/benchmarks_gpu.md (device, versions, date,
# one section per part), to be copied into docs/.
#
# Environment:
#   OUT             results folder (default ./device_out): log.txt, env.txt, rows.jsonl,
#                   multileaf.txt, status.txt, benchmarks_gpu.md (6 files)
#   PYTHON          the interpreter (default python3; GPU machines here: the image's own,
#                   which already holds jax with its CUDA plugin)
#   WHEELS          a folder of wheels (default .whl) installed first, offline, into
#                   /tmp/jaxpuct_site: how mctx and pgx reach a machine without registry
#                   access (see docs/benchmarks.md)
#   TOTAL_BUDGET_S  seconds for everything, setup included (default 480)
#   SMOKE=1         the same as --smoke
#
# On this workplace's device tool: first `benchmarks/device_run.sh --fetch-wheels` here,
# then run(command="benchmarks/device_run.sh", carry=[".whl"], timeout_s=570): the
# parts end by 480 s, the rest is setup and slack; 6 files come back from $OUT.
set -euo pipefail

SMOKE=${SMOKE:-0}
FETCH=0
for arg in "$@"; do
  case "$arg" in
    --smoke) SMOKE=1 ;;
    --fetch-wheels) FETCH=1 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."

if [[ "$FETCH" == 1 ]]; then
  # The versions installed here, as wheels for CPython 3.12 on x86-64 Linux (the GPU
  # image's python3); all three are pure Python.
  py=${PYTHON:-python3}
  specs=$("$py" -c "import importlib.metadata as m
print(' '.join(f'{p}=={m.version(p)}' for p in ('mctx', 'pgx', 'svgwrite')))")
  echo "downloading $specs into ${WHEELS:-.whl}"
  "$py" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 -d "${WHEELS:-.whl}" $specs
  exit 0
fi
OUT=${OUT:-./device_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
: >"$OUT/log.txt"
: >"$OUT/rows.jsonl"
: >"$OUT/status.txt"
exec > >(tee -a "$OUT/log.txt") 2>&1

START=$SECONDS
TOTAL_BUDGET_S=${TOTAL_BUDGET_S:-480}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

say() { echo "== [$((SECONDS - START)) s] $*"; }

# ------------------------------------------------------------------ setup
if [[ "$SMOKE" == 1 ]]; then
  say "smoke mode: CPU, tiny sizes, no installs"
  export JAX_PLATFORMS=cpu
  TOTAL_BUDGET_S=${SMOKE_BUDGET_S:-300}
else
  WHEELS=${WHEELS:-.whl}
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    say "installing the wheels of $WHEELS offline into /tmp/jaxpuct_site"
    if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/jaxpuct_site "$WHEELS"/*.whl; then
      export PYTHONPATH="$PYTHONPATH:/tmp/jaxpuct_site"
    else
      echo "WARNING: installing the wheels of $WHEELS failed"
    fi
  fi
  if "$PY" -c "import jax, flax, optax, chex, mctx, pgx" 2>/dev/null; then
    say "jax, flax, optax, chex, mctx and pgx import: no project install needed"
  else
    say "installing the project: pip install -e .[bench,examples]"
    if ! timeout 180 "$PY" -m pip install -q --retries 1 --timeout 15 -e ".[bench,examples]"; then
      echo "WARNING: pip install -e .[bench,examples] FAILED (no registry here?)."
      echo "         Missing: $("$PY" -c 'import importlib.util as u; print(*[m for m in
               ("jax", "flax", "optax", "chex", "mctx", "pgx") if not u.find_spec(m)])')"
      echo "         Carry them as wheels in $WHEELS (docs/benchmarks.md says how)."
    fi
  fi
  # The accelerator build of the installed jax: its CUDA plugin, of the CUDA major
  # version that both the installed jax offers (its metadata's extras) and the driver
  # runs (nvidia-smi's "CUDA Version"); 13 before 12.
  backend=$("$PY" -c "import jax; print(jax.default_backend())" 2>/dev/null || echo none)
  if [[ "$backend" == gpu ]]; then
    say "jax already runs on the GPU: no CUDA install needed"
  else
    version=$("$PY" -c "import jax; print(jax.__version__)" 2>/dev/null || echo "")
    extras=$("$PY" -c "import importlib.metadata as m
print(' '.join(m.metadata('jax').get_all('Provides-Extra') or []))" 2>/dev/null || echo "")
    driver_cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' \
                  | head -1 || true)
    extra=""
    for candidate in cuda13 cuda12; do
      if [[ " $extras " == *" $candidate "* && -n "$driver_cuda" \
            && "$driver_cuda" -ge "${candidate#cuda}" ]]; then
        extra=$candidate
        break
      fi
    done
    say "jax backend '$backend', jax $version, extras: $extras; driver CUDA $driver_cuda"
    if [[ -z "$extra" || -z "$version" ]]; then
      echo "WARNING: no CUDA build of jax to install (no jax, no matching extra, or no"
      echo "         driver): the benchmarks run on $backend and say so in their report."
    else
      say "installing jax[$extra]==$version"
      if ! timeout 300 "$PY" -m pip install -q --retries 1 --timeout 15 \
          "jax[$extra]==$version"; then
        echo "WARNING: pip install jax[$extra]==$version FAILED: running on $backend."
      fi
    fi
  fi
fi

{
  echo "# nvidia-smi"
  nvidia-smi 2>&1 || echo "(no nvidia-smi)"
  echo "# jax.devices()"
  "$PY" -c "import jax; print(jax.__version__, jax.devices())" 2>&1 || echo "(jax failed)"
} | tee "$OUT/env.txt"

# ------------------------------------------------------------------ parts
# part KEY SECONDS CMD...: runs CMD under `timeout` for at most SECONDS and at most the
# budget left; records "KEY ok|timeout|failed:RC SECONDS" in status.txt.
part() {
  local key=$1 want=$2
  shift 2
  local left=$((TOTAL_BUDGET_S - (SECONDS - START) - 15))  # 15 s kept for the report
  local limit=$((want < left ? want : left))
  if ((limit < 10)); then
    say "part $key skipped: ${left} s of the budget left"
    echo "$key skipped 0" >>"$OUT/status.txt"
    return 0
  fi
  say "part $key (at most $limit s): $*"
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" || rc=$?
  local status=ok
  if ((rc == 124 || rc == 137)); then status=timeout; elif ((rc != 0)); then status=failed:$rc; fi
  say "part $key: $status after $((SECONDS - t0)) s"
  echo "$key $status $((SECONDS - t0))" >>"$OUT/status.txt"
}

ROWS="$OUT/rows.jsonl"
if [[ "$SMOKE" == 1 ]]; then
  part a 120 "$PY" -m benchmarks.compare_mctx --quick --workloads grid --cases 4:8:82 \
    --reps 1 --min-reps 1 --rows-json "$ROWS"
  # b traces its four steps and the network (no compiles: a timed run of the four
  # pgx searches costs minutes of CPU); SMOKE_TIMED=1 times them instead.
  trace=--trace-only
  [[ "${SMOKE_TIMED:-0}" == 1 ]] && trace=""
  part b 120 "$PY" -m benchmarks.selfplay_step --quick --games connect_four $trace \
    --rows-json "$ROWS"
  part c 120 bash -c "set -o pipefail; '$PY' -m benchmarks.multileaf --skip-quality \
    --batches 1 --ks 4 --net-batches 1 --reps 1 | tee '$OUT/multileaf.txt'"
  part e 60 "$PY" -m benchmarks.kernels --time --batch 2 --cases 8:2 --policies puct \
    --json "$ROWS"
  part d 60 "$PY" -m benchmarks.max_batch --simulations 4 --num-actions 8 --start 2 \
    --max-batch 4 --searches jaxpuct/mctx-rule --rows-json "$ROWS"
else
  # a: 5 cases x 3 searches, cheapest first; 3 calls each where a call is fast, 1 where
  # it is slow (H200, 2026-12-04: one mctx call at B=1024, S=800 took 60 s).
  part a 165 "$PY" -m benchmarks.compare_mctx --workloads grid \
    --cases 16384:64:82,4096:64:362,4096:200:82,256:800:362,1024:800:82 \
    --reps 3 --min-reps 1 --budget 5 --rows-json "$ROWS"
  # b: connect_four (2x32 ResNet) first, then go_9x9 (6x64); rows after each game.
  part b 100 "$PY" -m benchmarks.selfplay_step --games connect_four,go_9x9 --batch 1024 \
    --simulations 64 --reps 3 --budget 5 --rows-json "$ROWS"
  part c 55 bash -c "set -o pipefail; '$PY' -m benchmarks.multileaf --skip-quality \
    --batches 1,8 --ks 1,4,16 --reps 5 | tee '$OUT/multileaf.txt'"
  # e: about 30 s per batch size on an H200 (2026-12-04), compiles included.
  part e 60 bash -c "'$PY' -m benchmarks.kernels --time --batch 1024 --cases 82:64 \
    --json '$ROWS' && '$PY' -m benchmarks.kernels --time --batch 8 --cases 82:64 \
    --json '$ROWS'"
  # d: all but 5% of the GPU's memory to XLA, so the largest B is the card's; each
  # search doubles in a process of its own (max_batch's default).
  part d 90 env XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 "$PY" -m benchmarks.max_batch \
    --simulations 16 --num-actions 362 --start 262144 --max-batch 16777216 --budget 75 \
    --rows-json "$ROWS"
fi

say "report"
timeout 60 "$PY" -m benchmarks.device_report "$OUT" || echo "WARNING: the report failed"
say "done in $((SECONDS - START)) s; results in $OUT"
