"""The ctxproxy server of `bench/hostile/run.py`: its config per phase (policies `tiny` and
`reject`, memory or Redis store), the subprocess, its log scan and the Redis clean-up."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common.ctxproxy_server import Server, ctxproxy_command

TINY = """
budget: {context_window: 2500, reserved_output: 200, safety_margin: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 300, preview_head_chars: 60,
     preview_tail_chars: 20}
  - {kind: clear_tool_results, keep_recent_exchanges: 0}
  - {kind: drop_turns, keep_recent_turns: 1}
"""
REJECT = TINY + "on_invalid: reject\nread_tool: {max_rounds: 0}\n"
KEYS = {"tiny": "sk-hostile-tiny", "reject": "sk-hostile-reject", "default": "sk-hostile-default"}


def proxy_config(phase: str, port: int, upstream: str, prefix: str | None, tmp: Path) -> Path:
    policies = tmp / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "tiny.yaml").write_text(TINY)
    (policies / "reject.yaml").write_text(REJECT)
    store: dict[str, Any] = {"kind": "memory", "secret": "hostile-run"}
    if prefix is not None:
        store = {**store, "kind": "redis", "url": "redis://127.0.0.1:6379/0", "key_prefix": prefix}
    if phase == "passthrough":
        auth: dict[str, Any] = {"mode": "passthrough", "passthrough_tenant": "tiny"}
        tenants: list[dict[str, Any]] = [{"name": "tiny", "policy": "tiny"}]
    else:
        auth = {"mode": "keys"}
        tenants = [{"name": n, "keys": [k], "policy": n} for n, k in KEYS.items()]
    config = {
        "server": {"host": "127.0.0.1", "port": port, "log_level": "WARNING", "log_format": "text"},
        "store": store,
        "upstreams": [{"name": "fake", "base_url": upstream,
                       "timeouts": {"first_byte_s": 20, "idle_read_s": 20, "total_s": 120}}],
        "auth": auth,
        "tenants": tenants,
        "policies_dir": str(policies),
    }  # fmt: skip
    path = tmp / f"{phase}.json"
    path.write_text(json.dumps(config))
    return path


@contextmanager
def running_proxy(
    ctxproxy: str | None, config: Path, port: int, log_lines: collections.Counter[str]
) -> Iterator[Server]:
    """`ctxproxy serve` on that config; its exit and its log's Traceback/ERROR lines counted."""
    log = config.with_suffix(".log")
    server = Server([*ctxproxy_command(ctxproxy), "serve", "--config", str(config)], port, log)
    try:
        server.wait_ready()
        yield server
    finally:
        alive = server.proc.poll() is None
        server.stop()
        if not alive:
            log_lines[f"the proxy exited with {server.proc.returncode}"] += 1
        scan_log(log, log_lines)


def scan_log(log: Path, log_lines: collections.Counter[str]) -> None:
    for line in log.read_text(errors="replace").splitlines():
        if "Traceback" in line:
            log_lines["Traceback"] += 1
        elif " ERROR " in line:
            log_lines["ERROR: " + line.split(" ERROR ", 1)[1][:90]] += 1


def delete_prefix(prefix: str, url: str = "redis://127.0.0.1:6379/0") -> int:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])
    client.close()
    return len(keys)
