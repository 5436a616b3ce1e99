"""The round-two hostile run (`python -m bench.hostile.round_two`): compression bombs, nesting,
calibration poisoning, anonymous writes and summary injection against a real proxy, with
`/healthz` probed throughout and one table of targets (`run.py`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "support"))  # the fakes
