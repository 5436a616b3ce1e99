"""The slow pass of a mutation run: the tests the quick pass left out, on its survivors.

`MUTATION_QUICK_PASS=S bash bench/mutation/run.sh ...` runs each mutant against its tests that took
at most S seconds in mutmut's clean run (tests/conftest.py). Every survivor of that pass is then run
here against the rest of its tests (the ones over S seconds), quickest first, stopping at the
first failure, exactly as mutmut would have run them. A mutant a test kills (or that runs past its
time limit) is recorded in mutmut's own results (`mutants/**/*.meta`), so `mutmut results` then
gives the verdict of the whole test selection. Run it once mutmut's run has ended: a running
mutmut rewrites its results files and would drop what this records (the lines printed remain).

    python -m bench.mutation.slow 1.0 [NAME_GLOB ...]   # S of the quick pass; mutants to check

Environment: JOBS (2) mutants at a time. Prints one line per mutant and a count.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MUTANTS = Path(__file__).resolve().parents[2] / "mutants"
KILLED, TIMEOUT = 1, 36  # mutmut's exit codes for a killed and a timed-out mutant


def survivors(patterns: list[str]) -> dict[str, Path]:
    """Each surviving mutant matching `patterns`, with the results file that holds it."""
    found: dict[str, Path] = {}
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            if code == 0 and (not patterns or any(fnmatch.fnmatch(name, p) for p in patterns)):
                found[name] = meta
    return found


def slow_tests(name: str, stats: dict[str, dict], limit: float) -> list[str]:
    """The tests of `name`'s function that the quick pass left out, quickest first."""
    durations = stats["duration_by_test"]
    function = name.rsplit("__mutmut_", 1)[0]
    tests = sorted(stats["tests_by_mangled_function_name"].get(function, []),
                   key=lambda test: durations.get(test, 0.0))
    return [test for test in tests[1:] if durations.get(test, 0.0) > limit]


def run(name: str, tests: list[str], seconds: float) -> int | None:
    """mutmut's exit code for `name` against `tests`: killed, timeout, or None (survived)."""
    env = {**os.environ, "MUTANT_UNDER_TEST": name, "PYTHONPATH": str(MUTANTS),
           "CI": os.environ.get("CI", "1")}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        done = subprocess.run(command, cwd=MUTANTS, env=env, capture_output=True,
                              timeout=seconds)
    except subprocess.TimeoutExpired:
        return TIMEOUT
    if done.returncode == 1:
        return KILLED
    if done.returncode != 0:
        raise RuntimeError(f"{name}: pytest exit {done.returncode}\n{done.stdout.decode()[-2000:]}")
    return None


def record(meta: Path, name: str, code: int) -> None:
    data = json.loads(meta.read_text())
    data["exit_code_by_key"][name] = code
    meta.write_text(json.dumps(data, indent=4))


def main() -> None:
    limit, patterns = float(sys.argv[1]), sys.argv[2:]
    stats = json.loads((MUTANTS / "mutmut-stats.json").read_text())
    todo = survivors(patterns)

    def check(name: str) -> tuple[str, int | None, int, float]:
        tests = slow_tests(name, stats, limit)
        if not tests:
            return name, None, 0, 0.0
        budget = 30 + 10 * sum(stats["duration_by_test"].get(t, 1.0) for t in tests)
        start = time.monotonic()
        return name, run(name, tests, budget), len(tests), time.monotonic() - start

    counts = {"killed": 0, "timeout": 0, "survived": 0}
    with ThreadPoolExecutor(int(os.environ.get("JOBS", "2"))) as pool:
        for name, code, n, took in pool.map(check, sorted(todo)):
            verdict = {KILLED: "killed", TIMEOUT: "timeout", None: "survived"}[code]
            counts[verdict] += 1
            if code is not None:
                record(todo[name], name, code)
            print(f"{name}: {verdict} ({n} slow tests, {took:.0f} s)", flush=True)
    print(" ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
