"""`python -m bench.tools`: the measurements of the family in turn (tokens, slimming,
ranking, latency); see bench/tools/README.md."""

import sys

from bench.tools import latency, ranking, slimming, tokens

if __name__ == "__main__":
    sys.argv[0] = "python -m bench.tools"
    print("## Tool-definition tokens per request")
    tokens.main()
    print("\n## Slimmed schemas")
    slimming.main()
    print("\n## Ranking hit rate")
    ranking.main()
    print("\n## Latency of a find_tools round")
    raise SystemExit(latency.main())
