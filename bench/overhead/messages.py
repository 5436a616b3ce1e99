"""The `/v1/messages` cell of the overhead benchmark: Anthropic Messages through ctxproxy.

The same agent conversations as bench/overhead/bodies.py (a system prompt, the task, old turns
with big tool results, a fixed tail), written as Messages bodies (`system` field, `tool_use`
blocks, `tool_result` blocks in user messages), sent closed-loop by bench/overhead/loadgen.py to:
`direct` (the fast mock, bench/overhead/mock_upstream.py, which answers any POST),
`ctxproxy-pass` (an `anthropic` upstream on the mock, policy `inspect`: counted, original bytes
forwarded) and `ctxproxy-offload` (bench/overhead/policies/overhead-offload.yaml: offload and drop
on every request). Prints p50/p99 latency and the p50 overhead over `direct`; `--write-results`
appends/replaces the "Anthropic /v1/messages overhead" section of bench/overhead/RESULTS.md.

    python -m bench.overhead.messages [--duration 4] [--concurrency 1 8] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.overhead.bodies import SIZES, build_body
from bench.overhead.load import Load, Loader
from bench.overhead.procs import Processes, Server, free_port

REPO = Path(__file__).resolve().parents[2]
MODEL = "claude-haiku-4-5"
SECTION = "## Anthropic /v1/messages overhead"


def to_messages(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions body as the equivalent Messages body."""
    system = [m["content"] for m in chat["messages"] if m["role"] == "system"]
    messages: list[dict[str, Any]] = []
    for message in chat["messages"]:
        role = message["role"]
        if role == "assistant" and message.get("tool_calls"):
            blocks = [
                {
                    "type": "tool_use",
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "input": json.loads(c["function"]["arguments"]),
                }
                for c in message["tool_calls"]
            ]
            messages.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
            }
            messages.append({"role": "user", "content": [block]})
        elif role in ("user", "assistant"):
            messages.append({"role": role, "content": message["content"]})
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in chat["tools"]
    ]
    return {
        "model": MODEL,
        "max_tokens": 100,
        "system": "\n".join(system),
        "messages": messages,
        "tools": tools,
    }


def config(path: Path, mock_port: int, policy: str, policies_dir: Path | None) -> Path:
    lines = [
        "server: {log_level: WARNING, max_body_bytes: 67108864}",
        f"upstreams: [{{name: mock, kind: anthropic, base_url: 'http://127.0.0.1:{mock_port}'}}]",
        "auth: {mode: passthrough, passthrough_tenant: bench}",
        f"tenants: [{{name: bench, policy: {policy}}}]",
    ]
    if policies_dir is not None:
        lines.append(f"policies_dir: '{policies_dir}'")
    path.write_text("\n".join(lines) + "\n")
    return path


def servers(tmp: Path, procs: Processes) -> dict[str, Server]:
    py = sys.executable
    mock_port = free_port()
    ctxproxy = [py, "-m", "proxy.cli", "serve", "--config"]
    made = {
        "direct": Server(
            "direct",
            [py, str(REPO / "bench/overhead/mock_upstream.py"), "--port", str(mock_port)],
            mock_port,
            ready_path="/",
            log=tmp / "mock.log",
        ),
    }
    for name, policy, directory in (
        ("ctxproxy-pass", "inspect", None),
        ("ctxproxy-offload", "overhead-offload", REPO / "bench/overhead/policies"),
    ):
        port = free_port()
        argv = [
            *ctxproxy,
            str(config(tmp / f"{name}.yaml", mock_port, policy, directory)),
            "--port",
            str(port),
        ]
        made[name] = Server(
            name, argv, port, ready_path="/healthz", ready_timeout=60, log=tmp / f"{name}.log"
        )
    for server in made.values():
        procs.add(server)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES))
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args(argv)
    procs = Processes()
    rows: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            made = servers(tmp, procs)
            for server in made.values():
                server.start(REPO)
            for server in made.values():
                server.wait_ready()
            loader = Loader(procs, None, "python", tmp)
            for size in args.sizes:
                body = tmp / f"{size}.json"
                chat = json.loads(build_body(SIZES[size]))
                body.write_text(json.dumps(to_messages(chat), separators=(",", ":")))
                for conc in args.concurrency:
                    results = {}
                    for label, server in made.items():
                        url = f"http://127.0.0.1:{server.port}/v1/messages"
                        loader.run(Load(url, body, conc, 1.0, 0, "Bearer sk-bench", False))
                        results[label] = loader.run(
                            Load(url, body, conc, args.duration, 0.3, "Bearer sk-bench", False)
                        )
                    rows += [
                        _row(size, conc, label, r, results["direct"])
                        for label, r in results.items()
                    ]
                    print("\n".join(rows[-len(results) :]), flush=True)
    finally:
        procs.stop_all()
    table = _table(rows, args)
    print(table)
    if args.write_results:
        _write(table)
    return 0


def _row(size: str, conc: int, label: str, r: dict[str, Any], direct: dict[str, Any]) -> str:
    added = (r["p50_us"] - direct["p50_us"]) / 1000
    return (
        f"| {size} | {conc} | {label} | {r['rps']:.0f} | {r['p50_us'] / 1000:.2f} | "
        f"{r['p99_us'] / 1000:.2f} | {added:+.2f} | {r['errors']} |"
    )


def _table(rows: list[str], args: argparse.Namespace) -> str:
    head = (
        f"{SECTION}\n\n`python -m bench.overhead.messages --duration {args.duration:g} "
        f"--concurrency {' '.join(map(str, args.concurrency))}` "
        "(closed loop, bench/overhead/loadgen.py, non-streaming; the mock answers at once; "
        "bodies: bench/overhead/bodies.py as Messages bodies; `ctxproxy-pass`: policy "
        "`inspect`, `ctxproxy-offload`: offload + drop on every request; shared 2-core machine, "
        "unpinned, so numbers are indicative).\n\n"
        "| body | conc | config | rps | p50 ms | p99 ms | p50 over direct ms | errors |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n"


def _write(table: str) -> None:
    path = REPO / "bench/overhead/RESULTS.md"
    text = path.read_text()
    start = text.find(SECTION)
    if start < 0:
        path.write_text(text.rstrip("\n") + "\n\n" + table)
        return
    end = text.find("\n## ", start + len(SECTION))
    path.write_text(text[:start] + table + (text[end + 1 :] if end >= 0 else ""))


if __name__ == "__main__":
    raise SystemExit(main())
