"""The run's raw observations as files under `<out>/raw/` (credentials left out).

- `client.jsonl`: one line per request a CLI sent (seq, cli, turn, method, path, headers without
  credentials, body, status, the proxy's answer headers, seconds);
- `upstream.jsonl`: one line per request the fake received (seq, path, answer kind, body);
- `manifests.json`: the dry-run manifests by seq; `proxy.jsonl`: the proxy's log lines;
- `turns.json`: each CLI invocation (argv, exit code, stdout, stderr tail, seconds).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from bench.agents.recorder import ClientRecord
from bench.agents.run import RunData

CREDENTIALS = frozenset({"authorization", "x-api-key", "api-key", "cookie"})


def public_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: ("<redacted>" if k.lower() in CREDENTIALS else v) for k, v in headers.items()}


def client_line(record: ClientRecord) -> dict[str, Any]:
    body = record.json_body()
    return {
        "seq": record.seq,
        "cli": record.cli,
        "turn": record.turn,
        "method": record.method,
        "path": record.path,
        "headers": public_headers(record.headers),
        "body": body if body is not None else record.body.decode("utf-8", "replace")[:4000],
        "status": record.status,
        "response_headers": record.response_headers,
        "seconds": round(record.seconds, 3),
        "error": record.error,
        "answer_head": record.answer[:4000].decode("utf-8", "replace"),
    }


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_raw(data: RunData, out: Path) -> Path:
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    _jsonl(raw / "client.jsonl", [client_line(r) for r in data.client])
    _jsonl(raw / "upstream.jsonl", [dataclasses.asdict(r) for r in data.upstream])
    _jsonl(raw / "proxy.jsonl", data.proxy_log)
    (raw / "manifests.json").write_text(json.dumps(data.manifests, indent=1))
    turns = [
        {**dataclasses.asdict(t), "answered": t.answered, "stderr": t.stderr[-4000:]}
        for t in data.turns
    ]
    (raw / "turns.json").write_text(json.dumps(turns, indent=1, ensure_ascii=False))
    return raw
