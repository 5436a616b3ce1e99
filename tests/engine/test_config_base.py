"""config_base: every engine config model is strict, frozen and refuses nan/inf."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from proxy.engine.config_base import StepConfig, StrictModel


class Limits(StrictModel):
    ratio: float = 0.5


def test_strict_models_refuse_unknown_keys_nan_and_changes() -> None:
    with pytest.raises(ValidationError):
        Limits.model_validate({"ratoi": 0.5})
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValidationError):
            Limits(ratio=value)
    limits = Limits()
    with pytest.raises(ValidationError):
        limits.ratio = 0.7


def test_a_step_config_relaxes_nothing_by_default() -> None:
    config = StepConfig(kind="any")
    assert config.relaxed() is None and config.relax_note == ""
