"""`python -m bench.mutation` prints the family's commands; a mutation run takes hours, so it is
not started from here (what is mutated and which tests run: [tool.mutmut] in pyproject.toml):

    pip install -e '.[dev,mutation]'                            # once (pins mutmut)
    bash bench/mutation/run.sh ['proxy.engine.budget*' ...]     # the run (all, or names matching)
    MUTATION_QUICK_PASS=1.0 bash bench/mutation/run.sh GLOB...  # quick pass: tests <= 1 s only
    python -m bench.mutation.slow 1.0 [GLOB ...]                # then the rest, on its survivors

See bench/mutation/README.md, RESULTS.md and survivors.md.
"""

if __name__ == "__main__":
    print(__doc__.rstrip())
