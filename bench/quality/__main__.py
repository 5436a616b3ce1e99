"""`python -m bench.quality`: the policy-quality run (`bench.quality.run`). The family's other
entry point: `python -m bench.quality.dryrun_snapshot` (see bench/quality/README.md)."""

from bench.quality.run import main

if __name__ == "__main__":
    raise SystemExit(main())
