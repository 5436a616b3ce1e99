"""The servers of the overhead benchmark (`chat`): the fast mock, the reference forwarder, ctxproxy
passthrough (`inspect`) and offloading (policies/overhead-offload.yaml), LiteLLM's proxy, each on
its own free port and CPU set; and the one request per server and body that checks each answers
as expected before anything is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from bench.overhead.procs import Processes, Server, free_port, http_request

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "bench/overhead/policies"
BIN = Path(sys.executable).parent
# LiteLLM refuses to start without a master key; every configuration gets the same header.
MASTER_KEY = "sk-1f0e5a7c9b3d4e2f8a6b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f"
AUTHORIZATION = f"Bearer {MASTER_KEY}"


def cpu_layout(no_pin: bool) -> tuple[set[int] | None, set[int] | None, set[int] | None]:
    """(load generator, mock, process under test) CPU sets."""
    cpus = sorted(os.sched_getaffinity(0))
    if no_pin or len(cpus) < 2:
        return None, None, None
    if len(cpus) == 2:
        return {cpus[0]}, {cpus[0]}, {cpus[1]}
    return {cpus[0]}, {cpus[1]}, {cpus[2]}


def ctxproxy_config(
    path: Path, mock_port: int, policy: str, policies_dir: Path | None, event_loop: str = "auto"
) -> Path:
    """A config.yaml for ctxproxy in front of the mock (`event_loop`: `server.event_loop`)."""
    lines = [
        f"server: {{log_level: WARNING, max_body_bytes: 67108864, event_loop: {event_loop}}}",
        f"upstreams: [{{name: mock, base_url: 'http://127.0.0.1:{mock_port}/v1', "
        "max_connections: 256}]",
        "auth: {mode: passthrough, passthrough_tenant: bench}",
        f"tenants: [{{name: bench, policy: {policy}}}]",
    ]
    if policies_dir is not None:
        lines.append(f"policies_dir: '{policies_dir}'")
    path.write_text("\n".join(lines) + "\n")
    return path


def build_servers(
    args: argparse.Namespace,
    tmp: Path,
    procs: Processes,
    mock_cpus: set[int] | None,
    sut_cpus: set[int] | None,
) -> dict[str, Server]:
    py = sys.executable
    mock_port = free_port()
    ctxproxy = [str(BIN / "ctxproxy")] if (BIN / "ctxproxy").exists() else [py, "-m", "proxy.cli"]
    servers = {
        "direct": Server(
            "direct",
            [
                py,
                str(REPO / "bench/overhead/mock_upstream.py"),
                "--port",
                str(mock_port),
                "--chunks",
                str(args.chunks),
                "--interval-ms",
                str(args.interval_ms),
            ],
            mock_port,
            mock_cpus,
            ready_path="/",
            log=tmp / "mock.log",
        )
    }
    specs: dict[str, tuple[list[str], str, dict[str, str], float]] = {
        "reference": (
            [
                py,
                str(REPO / "bench/overhead/ref_forwarder.py"),
                "--upstream",
                f"http://127.0.0.1:{mock_port}",
                "--port",
            ],
            "/",
            {},
            30,
        ),
        "ctxproxy-pass": (
            [
                *ctxproxy,
                "serve",
                "--config",
                str(ctxproxy_config(tmp / "pass.yaml", mock_port, "inspect", None)),
                "--port",
            ],
            "/healthz",
            {},
            60,
        ),
        "ctxproxy-pass-asyncio": (
            [
                *ctxproxy,
                "serve",
                "--config",
                str(ctxproxy_config(tmp / "asyncio.yaml", mock_port, "inspect", None, "asyncio")),
                "--port",
            ],
            "/healthz",
            {},
            60,
        ),
        "ctxproxy-offload": (
            [
                *ctxproxy,
                "serve",
                "--config",
                str(ctxproxy_config(tmp / "offload.yaml", mock_port, "overhead-offload", POLICIES)),
                "--port",
            ],
            "/healthz",
            {},
            60,
        ),
        "litellm": (
            [
                str(BIN / "litellm"),
                "--config",
                str(REPO / "bench/overhead/litellm_config.yaml"),
                "--host",
                "127.0.0.1",
                "--num_workers",
                "1",
                "--port",
            ],
            "/health/liveliness",
            {
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_LOG": "ERROR",
                "LITELLM_TELEMETRY": "False",
                "LITELLM_MASTER_KEY": MASTER_KEY,
                "BENCH_MOCK_API_BASE": f"http://127.0.0.1:{mock_port}/v1",
            },
            180,
        ),
    }
    for name, (argv, ready, env, timeout) in specs.items():
        if name in args.configs:
            port = free_port()
            servers[name] = Server(
                name, [*argv, str(port)], port, sut_cpus, env, ready, timeout, tmp / f"{name}.log"
            )
    for server in servers.values():
        procs.add(server)
    return servers


def validate(
    servers: dict[str, Server], bodies: dict[tuple[str, bool], Path], sizes: list[str]
) -> list[str]:
    """One request per configuration and body: 200, the mock's answer, the expected actions."""
    notes = []
    headers = {"Content-Type": "application/json", "Authorization": AUTHORIZATION}
    for name, server in servers.items():
        for size in sizes:
            for stream in (False, True):
                status, head, data = http_request(
                    server.port,
                    "POST",
                    "/v1/chat/completions",
                    bodies[size, stream].read_bytes(),
                    headers,
                    timeout=120,
                )
                want = b"[DONE]" if stream else b"chat.completion"
                if status != 200 or want not in data:
                    raise RuntimeError(f"{name} {size} stream={stream}: {status} {data[:300]!r}")
                actions = head.get("x-ctxproxy-actions")
                if name.startswith("ctxproxy-pass") and actions != "none":
                    raise RuntimeError(f"{name} {size}: expected no action, got {actions}")
                reduced = actions and "offload_tool_results" in actions and "drop_turns" in actions
                # never worse: a body whose reduction cannot pay for the read tools goes as it
                # came (the 2 KB body: its protected tail is most of it)
                kept = "never_worse" in (head.get("x-ctxproxy-notes") or "")
                if name == "ctxproxy-offload" and not (reduced or kept):
                    raise RuntimeError(f"{name} {size}: expected offload + drop, got {actions}")
                if kept and not stream:
                    notes.append(f"{name} {size}: never_worse (sent as it came)")
                if actions and not stream:
                    notes.append(
                        f"{name} {size}: x-ctxproxy-actions: {actions}, tokens "
                        f"{head.get('x-ctxproxy-tokens-before')} -> "
                        f"{head.get('x-ctxproxy-tokens-after')}"
                    )
    return notes


def reset_hwm(server: Server) -> None:
    with contextlib.suppress(OSError):
        Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # resets VmHWM to VmRSS
