"""Scrubbing captured client requests into fixtures: stable placeholders, same shape.

Replaced (in the JSON text of headers and body together, so nested JSON strings such as Claude
Code's `metadata.user_id` or Codex's `x-codex-turn-metadata` are covered too):
- the sandbox's paths (home, workspace, temp dir, the run directory), also in the dash-encoded
  form Claude Code names its project folders by, and the user's real home directory (unless it
  is `/root`, which Codex's texts use as the name of its main agent);
- the host name, the kernel release and the user name (unless it is a generic one like `root`);
- every UUID (session, device, installation, thread, turn, and Codex's `msg_<uuid>` item ids):
  the n-th distinct one becomes `00000000-0000-4000-8000-<n as 12 digits>`, the same in every
  fixture of one CLI's session;
- long hex ids (64 hex digits: device and machine ids) the same way;
- API keys (`sk-...`), the run's date and Codex's `turn_started_at_unix_ms`.
"""

from __future__ import annotations

import getpass
import json
import os
import platform
import re
import socket
import time
from pathlib import Path
from typing import Any

HOME = "/home/bench"
WORKSPACE = "/home/bench/workspace"
TMP = "/tmp/bench"
RUN_DIR = "/home/bench/run"
FIXED_DATE = "2026-01-01"
FIXED_MS = "1767225600000"
GENERIC_USERS = frozenset({"root", "user", "runner", "ubuntu", "bench"})
_UUID = re.compile(
    r"(?<![0-9a-fA-F])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"(?![0-9a-fA-F])"
)
_HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
_MS = re.compile(r"(turn_started_at_unix_ms\\*\"\s*:\s*)\d{10,}")


def _dashed(path: str) -> str:
    """Claude Code's project folder name for a path (`/a/.b/c` -> `-a--b-c`)."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def path_pairs(sandbox_root: Path) -> list[tuple[str, str]]:
    root = str(sandbox_root.resolve())
    pairs = [
        (f"{root}/workspace", WORKSPACE),
        (f"{root}/home", HOME),
        (f"{root}/tmp", TMP),
        (root, RUN_DIR),
    ]
    pairs += [(_dashed(a), _dashed(b)) for a, b in pairs]
    real_home = str(Path.home())
    if real_home != "/root":  # Codex calls its main agent `/root`: that name stays
        pairs.append((real_home + "/", HOME + "/"))
    return sorted(pairs, key=lambda p: -len(p[0]))


def _host_pairs() -> list[tuple[str, str]]:
    pairs = [(platform.release(), "6.1.0-bench")]
    host = socket.gethostname()
    if len(host) >= 4:
        pairs.append((host, "bench-host"))
    user = getpass.getuser()
    if user not in GENERIC_USERS and len(user) >= 3:
        pairs.append((user, "bench"))
    return pairs


class _Numbering:
    def __init__(self, template: str) -> None:
        self.template = template
        self.seen: dict[str, str] = {}

    def __call__(self, match: re.Match[str]) -> str:
        value = match.group(0).lower()
        if value not in self.seen:
            self.seen[value] = self.template.format(len(self.seen) + 1)
        return self.seen[value]


class Scrubber:
    """Scrubs the fixtures of one CLI's session: the same id gets the same placeholder in every
    file, so a session id stays one id across the turns."""

    def __init__(self, sandbox_root: Path, run_date: str | None = None) -> None:
        self.sandbox_root = sandbox_root
        self.run_date = run_date or time.strftime("%Y-%m-%d")
        self._uuids = _Numbering("00000000-0000-4000-8000-{:012d}")
        self._hex = _Numbering("{:064d}")

    def text(self, text: str) -> str:
        for old, new in path_pairs(self.sandbox_root) + _host_pairs():
            if old:
                text = text.replace(old, new)
        text = _UUID.sub(self._uuids, text)
        text = _HEX64.sub(self._hex, text)
        text = _KEY.sub("sk-bench-placeholder", text)
        text = text.replace(self.run_date, FIXED_DATE)
        return _MS.sub(lambda m: m.group(1) + FIXED_MS, text)

    def __call__(self, value: Any) -> Any:
        """`value` (JSON-able) scrubbed; still valid JSON with the same keys in the same order."""
        return json.loads(self.text(json.dumps(value, ensure_ascii=False)))


def leftovers(value: Any, sandbox_root: Path) -> list[str]:
    """What a scrubbed value still names that it should not (empty when clean)."""
    text = json.dumps(value, ensure_ascii=False)
    suspects = [
        str(sandbox_root.resolve()),
        _dashed(str(sandbox_root.resolve())),
        socket.gethostname(),
        os.environ.get("USER", ""),
    ]
    found = [s for s in suspects if len(s) >= 4 and s not in GENERIC_USERS and s in text]
    return found + _KEY.findall(text)
