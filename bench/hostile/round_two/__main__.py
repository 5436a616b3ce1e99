"""`python -m bench.hostile.round_two`: the round-two hostile run (`run.py`)."""

import sys

from bench.hostile.round_two.run import main

if __name__ == "__main__":
    sys.argv[0] = "python -m bench.hostile.round_two"
    sys.exit(main())
