"""The `summarize` step (compaction) and everything it needs, in one package.

- `step`: the step itself (its config, plan, settle, rewrite, precompute);
- `spans`: which dropped turns the summary covers and when it rolls up;
- `parts`: the texts of the summary item, its parts and its refusal;
- `extract`: the summary without a model (`summarizer.kind: extract`);
- `summarizer`: the seam to a model (`Summarizer`, the call, the strict answer shape, config);
- `model_summary`: getting a span's summary from a summarizer (frozen, rolled up, bounded);
- `cache`: frozen summaries in the store, reused by the next request (prefix stable);
- `background`: summaries made off the request path (bounded per tenant, one per span).

The format-specific summary request and answer stay in each format (`formats/*/summary.py`).
"""

from proxy.engine.steps.summarize.config import SummarizeConfig
from proxy.engine.steps.summarize.step import Summarize

__all__ = ["Summarize", "SummarizeConfig"]
