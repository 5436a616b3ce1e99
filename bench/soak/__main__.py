"""`python -m bench.soak [--quick]`: the soak run (`bench.soak.run`; its upstream is
bench/soak/upstream.py, started by it). See bench/soak/README.md."""

import sys

from bench.soak.run import main

if __name__ == "__main__":
    sys.argv[0] = "python -m bench.soak"
    main()
