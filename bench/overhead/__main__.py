"""`python -m bench.overhead`: the overhead benchmark on chat completions (`bench.overhead.chat`).
The family's other entry points (`python -m bench.overhead.<module>`): `messages` (the
`/v1/messages` cell), `ab_passthrough` (two source trees A/B), `startup`, `prepare`,
`prepare_responses` and `redis_roundtrips`; see bench/overhead/README.md."""

import sys

from bench.overhead.chat import main

if __name__ == "__main__":
    sys.argv[0] = "python -m bench.overhead"
    raise SystemExit(main())
