"""`python -m bench.hostile`: the hostile-input run on chat completions (`--formats
chat,responses` adds `/v1/responses`), i.e. `python -m bench.hostile.run`. The family's other
runs: `python -m bench.hostile.run_messages` (Anthropic Messages),
`python -m bench.hostile.availability` (`/healthz` under hostile load) and
`python -m bench.hostile.compression` (compressed bombs); see bench/hostile/README.md."""

import sys

from bench.hostile.run import main

if __name__ == "__main__":
    sys.argv[0] = "python -m bench.hostile"
    raise SystemExit(main())
