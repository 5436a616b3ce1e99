"""Seeded contents for the coding scenarios (D in `gen_tools`, F in `gen_agent`): a Python module
with planted lines, a pytest log (passing, or with one failure) and grep output with one hit."""

from __future__ import annotations

from bench.quality.text import Gen


def python_file(gen: Gen, module: str, planted: list[str], functions: int) -> str:
    """A plausible module; `planted` lines land in random places among the functions."""
    blocks = [f'"""{module}: {gen.sentence()}"""\n\nfrom __future__ import annotations\n']
    for _ in range(functions):
        name = "_".join(gen.words(2).split()).replace("-", "_")
        lines = [f"def {name}_{gen.hexid(4)}(value, *, limit=None):", f'    """{gen.sentence()}"""']
        lines += [
            f"    {gen.rng.choice(['total', 'result', 'item'])} = "
            f"{gen.rng.choice(['value', 'limit', 'len(value)'])}  # {gen.words(6)}"
            for _ in range(gen.rng.randint(3, 12))
        ]
        lines.append("    return result")
        blocks.append("\n".join(lines))
    for line in planted:
        blocks.insert(gen.rng.randint(len(blocks) // 3, len(blocks)), line)
    return "\n\n\n".join(blocks) + "\n"


def pytest_log(gen: Gen, tests: list[str], failing: str | None, message: str) -> str:
    lines = [
        f"{t} PASSED [{(i + 1) * 100 // len(tests):3d}%]"
        for i, t in enumerate(tests)
        if t != failing
    ]
    if failing is None:
        seconds = gen.rng.uniform(5, 40)
        return "\n".join(lines) + f"\n===== {len(tests)} passed in {seconds:.2f}s ====="
    trace = "\n".join(f"    {gen.words(7)}" for _ in range(30))
    return (
        "\n".join(lines) + "\n\n=================== FAILURES ===================\n"
        f"_____ {failing} _____\n{trace}\nE   AssertionError: {message}\n\n"
        f"=========== short test summary info ===========\nFAILED {failing} - {message}\n"
        f"===== 1 failed, {len(tests) - 1} passed in {gen.rng.uniform(5, 40):.2f}s ====="
    )


def grep_output(gen: Gen, hit: str, n: int) -> str:
    lines = [
        f"src/{gen.words(1)}/{gen.words(1)}.py:{gen.rng.randint(1, 900)}:    {gen.words(6)}"
        for _ in range(n)
    ]
    lines.insert(gen.rng.randint(n // 3, n), hit)
    return "\n".join(lines)
