"""What the A/B of `ab_passthrough` sets up: the request bodies (agent conversations of a given
size), the processes (pinned to CPUs, ready on `/healthz`, stopped with their process group), each
tree's `ctxproxy` and the config both proxies run with (passthrough auth, memory store, a policy
`ab-passthrough` with a 2,000,000-token window: nothing is ever reduced). Nothing in `proxy` is
imported.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL = "gpt-4o"
SIZES = {"2KB": 2 * 1024, "100KB": 100 * 1024}
AUTHORIZATION = "Bearer sk-ab-passthrough"
POLICY = (
    "extends: default\nbudget:\n  context_window: 2000000\n"
    "steps:\n  - {kind: offload_tool_results, when: over_trigger}\n"
    "  - {kind: clear_tool_results}\n  - {kind: drop_turns}\n"
)
"""Nothing is reduced, at any size: the huge window keeps every request under its trigger, and
offloading acts only over it (by default it offloads an oversized tool result when seen)."""


# -- bodies -------------------------------------------------------------------------------------

_VOCABULARY = (
    "def return import class self value result error test build module cache index request "
    "response handler config path file line status pass fail assert expected actual token "
    "the a of to in and for is on with that this from by at as it be are was or not"
)
_WORDS = _VOCABULARY.split()


def _text(rng: random.Random, chars: int) -> str:
    out, size = [], 0
    while size < chars:
        line = f"{rng.randint(1, 9999):>5}: " + " ".join(
            rng.choice(_WORDS) for _ in range(rng.randint(4, 12))
        )
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)[:chars]


def build_body(size: int) -> bytes:
    """An agent conversation (tool calls and results) of about `size` bytes; deterministic."""
    rng = random.Random(size)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent. Use the tools."},
        {"role": "user", "content": "Task: make the test suite of this repository pass."},
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }
    ]
    body = {"model": MODEL, "messages": messages, "tools": tools, "max_tokens": 100}

    def encoded() -> bytes:
        return json.dumps(body, separators=(",", ":")).encode()

    turns = max(1, size // 20_000 + 1)
    tail = {"role": "user", "content": "Now fix the failing test and explain why."}
    for n in range(turns):
        cid = f"call_{n:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"m{n}.py"}),
                        },
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": cid, "content": ""})
        left = size - len(encoded()) - len(json.dumps(tail)) - 1
        messages[-1]["content"] = _text(rng, max(100, left // (turns - n)))
    messages.append(tail)
    return encoded()


# -- processes ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_layout(no_pin: bool) -> tuple[str | None, str | None]:
    """(cpu for the load generator and mock, cpu for the proxies) as taskset lists."""
    cpus = sorted(os.sched_getaffinity(0))
    if no_pin or len(cpus) < 2 or shutil.which("taskset") is None:
        return None, None
    return str(cpus[0]), str(cpus[-1])


def pinned(argv: list[str], cpu: str | None) -> list[str]:
    return ["taskset", "-c", cpu, *argv] if cpu is not None else argv


def request(
    port: int, method: str, path: str, body: bytes | None = None, timeout: float = 30.0
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Authorization": AUTHORIZATION, "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


@dataclass
class Proc:
    name: str
    argv: list[str]
    port: int
    log: Path
    ready_path: str = "/healthz"
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"{self.name} exited with {self.proc.returncode}:\n"
                    + "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
                )
            try:
                if request(self.port, "GET", self.ready_path, timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"{self.name} not ready after {timeout:g}s (log {self.log})")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(10)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue


def add_records_options(parser: Any) -> None:
    """`--a-records` / `--b-records`: request records on or off in that server's config (the
    same tree twice, one of each: what recording costs); `--redis URL`: both on a Redis store."""
    parser.add_argument("--redis", metavar="URL", help="a Redis store (default: memory)")
    parser.add_argument(
        "--records-flush", type=float, metavar="S",
        help="server.records.flush_s (under valgrind, ~50x slower, scale it to keep batches)",
    )  # fmt: skip
    for side in ("a", "b"):
        parser.add_argument(
            f"--{side}-records", choices=("on", "off"), default=None,
            help=f"server.records.enabled of {side.upper()} (default: not set, the tree's own)",
        )  # fmt: skip


def delete_redis_keys(url: str | None) -> None:
    """The keys `write_config(redis_url=url)` gave this process's servers, deleted."""
    if url is None:
        return
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"ctxbench:*:{os.getpid()}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
    finally:
        client.close()


def records_note(records: str | None) -> str:
    return "" if records is None else f" (records {records})"


def ctxproxy_argv(tree: Path, venv: str) -> list[str]:
    bin_dir = tree / venv / "bin"
    if (bin_dir / "ctxproxy").exists():
        return [str(bin_dir / "ctxproxy")]
    if (bin_dir / "python").exists():
        return [str(bin_dir / "python"), "-m", "proxy.cli"]
    raise SystemExit(f"{tree}: no {venv}/bin/ctxproxy or {venv}/bin/python")


def describe_tree(tree: Path, venv: str) -> str:
    """Commit (+dirty) of the tree, and a check that its venv imports `proxy` from the tree."""
    git = (
        subprocess.run(
            ["git", "-C", str(tree), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "?"
    )
    py = tree / venv / "bin" / "python"
    where = subprocess.run(
        [str(py), "-c", "import proxy; print(proxy.__file__)"],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    ).stdout.strip()
    ok = where.startswith(str(tree.resolve()) + os.sep)
    note = "" if ok else f"  WARNING: its venv imports proxy from {where or '?'}"
    return f"{tree} @ {git}{note}"


def write_config(
    directory: Path,
    mock_port: int,
    log_level: str,
    records: str | None = None,
    redis_url: str | None = None,
    flush_s: float | None = None,
) -> Path:
    """The config both proxies run with; `records` "on"/"off" sets `server.records.enabled`
    (None: the key is not written, so a tree from before request records reads it too);
    `redis_url`: the Redis store there (under a key prefix of this directory's own) instead of
    the memory store."""
    directory.mkdir(parents=True, exist_ok=True)
    policies = directory / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "ab-passthrough.yaml").write_text(POLICY)
    config = {
        "server": {"host": "127.0.0.1", "log_level": log_level, "max_body_bytes": 67108864},
        "store": {"kind": "memory", "secret": "ab-passthrough"},
        "upstreams": [
            {
                "name": "mock",
                "base_url": f"http://127.0.0.1:{mock_port}/v1",
                "api_key": "",
                "max_connections": 256,
            }
        ],
        "auth": {"mode": "passthrough", "passthrough_tenant": "bench"},
        "tenants": [{"name": "bench", "policy": "ab-passthrough"}],
        "policies_dir": str(policies),
    }
    if records is not None:
        kept: dict[str, Any] = {"enabled": records == "on"}
        if flush_s is not None:
            kept["flush_s"] = flush_s
        config["server"]["records"] = kept  # type: ignore[index]
    if redis_url is not None:
        prefix = f"ctxbench:{directory.name}:{os.getpid()}:"
        config["store"] = {"kind": "redis", "url": redis_url, "key_prefix": prefix,
                           "secret": "ab-passthrough"}  # fmt: skip
    path = directory / "config.yaml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    return path
