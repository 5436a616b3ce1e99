"""Recorded provider wire files: the shared copy beside the repo, else the vendored copy."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_WIRE_DIR = REPO_ROOT.parent / "shared" / "wire"
VENDORED_WIRE_DIR = REPO_ROOT / "tests" / "fixtures" / "wire"
PARALLEL_TOOL_CALLS_SSE = "openai-chat-stream-parallel-tool-calls.sse"


def wire_file(name: str) -> Path:
    """A recorded wire file: `<repo>/../shared/wire/` if present, else `tests/fixtures/wire/`."""
    for directory in (SHARED_WIRE_DIR, VENDORED_WIRE_DIR):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"recorded wire file {name!r} is in neither {SHARED_WIRE_DIR} nor {VENDORED_WIRE_DIR}"
    )
