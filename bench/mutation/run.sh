#!/usr/bin/env bash
# Mutation run with mutmut over the engine, the chat format adapter, the stores, the read tool (and
# the shortening of its results), the SSE code and the fitting of the read loop's follow-up calls
# (what is mutated and which tests run: [tool.mutmut] in pyproject.toml). Slow, so not part of CI.
#
#   pip install -e '.[dev,mutation]'                    # once (pins mutmut)
#   bash bench/mutation/run.sh                          # every configured module (~5,600 mutants)
#   bash bench/mutation/run.sh 'proxy.engine.budget*'   # only the mutants whose names match
#
# Needs the test Redis (127.0.0.1:6379 db 13, as the test suite). Each mutant runs only the tests
# that call its function (mutmut records that in a first, clean run of the selection). Mutated
# copies and results live in mutants/ (git-ignored; delete it to start afresh). Afterwards:
# `python -m mutmut results` lists the survivors, `python -m mutmut show NAME` shows one's diff.
#
# Environment: JOBS (2) parallel mutants; PYTHON (python). CI is set (as in CI) unless given: the
# property tests then run their fixed, derandomised examples, so a mutant's verdict is reproducible.
# Each mutant runs its quickest tests first (tests/conftest.py) and stops at the first failure.
#
# Two passes, for modules whose survivors run minutes of tests each (the preparer, the reducer):
#   MUTATION_QUICK_PASS=1.0 bash bench/mutation/run.sh 'proxy.engine.preparer*'  # tests <= 1 s
#   python -m bench.mutation.slow 1.0 'proxy.engine.preparer*'  # the rest, on its survivors
# Together they give the verdict of the whole selection (bench/mutation/slow.py records its kills
# in mutmut's results), in a fraction of the time when many survivors are killed by a new test
# before the slow pass.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python}
export CI=${CI:-1}
"$PYTHON" -m mutmut run --max-children "${JOBS:-2}" "$@"
"$PYTHON" -m mutmut results | grep -v ': not checked$' || true  # survivors, timeouts, ...
