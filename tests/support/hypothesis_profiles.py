"""Hypothesis profiles: how many examples the property tests draw, and which.

    default   a developer's run: a share of each test's nightly count, new random examples
    ci        `CI` set: the same counts, derandomized (a fixed sequence, so red or green
              reproducibly)
    nightly   `HYPOTHESIS_PROFILE=nightly`: each test's full count, new random examples

`HYPOTHESIS_PROFILE` names the profile (and wins over `CI`; hypothesis' own `--hypothesis-profile`
works too). "default" replaces hypothesis' built-in profile of that name. A property test states
its nightly count with `examples(n)`; one that states none draws hypothesis' usual 100 nightly and
`DEFAULT_EXAMPLES` otherwise. No profile has a deadline or the `too_slow` health check: on a loaded
machine any example may be slow, and no test asserts how long something took.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

NIGHTLY_EXAMPLES = 100
"""Examples of a test that states no count, nightly (hypothesis' own default)."""
SHARE = 0.4
"""The share of its nightly count a test draws in the default and ci profiles."""
DEFAULT_EXAMPLES = round(NIGHTLY_EXAMPLES * SHARE)
MIN_EXAMPLES = 10
"""Never fewer, whatever the share: a property test that draws a handful checks little."""

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("default", max_examples=DEFAULT_EXAMPLES, **_COMMON)
settings.register_profile(
    "ci", max_examples=DEFAULT_EXAMPLES, derandomize=True, print_blob=True, **_COMMON
)
settings.register_profile("nightly", max_examples=NIGHTLY_EXAMPLES, print_blob=True, **_COMMON)


def profile_name() -> str:
    """The profile this run uses: `HYPOTHESIS_PROFILE`, else `ci` when `CI` is set."""
    named = os.environ.get("HYPOTHESIS_PROFILE")
    if named:
        return named
    return "ci" if os.environ.get("CI") else "default"


def load_profile() -> None:
    """Load this run's profile (tests/conftest.py does, before any test module is imported)."""
    settings.load_profile(profile_name())


def examples(nightly: int) -> int:
    """The examples a test draws: `nightly` under the nightly profile, `SHARE` of it (at least
    `MIN_EXAMPLES`, at most `nightly`) under the others. Called when a test module is imported,
    after the profile is loaded."""
    if settings.get_current_profile_name() == "nightly":
        return nightly
    return min(nightly, max(MIN_EXAMPLES, round(nightly * SHARE)))
