"""Dry-run snapshot: the exact `POST /v1/context/prepare` answers of a fixed request set.

Evidence that a refactor leaves behaviour unchanged: run this script in the tree before and after
the refactor (each with its own venv) and compare the two output files byte for byte (`cmp`, the
printed sha256, or `--compare <reference>`, which also names the first differing requests).

    python -m bench.quality.dryrun_snapshot --out /tmp/dryrun.jsonl [--seeds 1] [--turns 40]
                                            [--large]
    python -m bench.quality.dryrun_snapshot --out /tmp/after.jsonl --compare /tmp/before.jsonl

What it does:

1. Writes a temporary config: a memory store with a FIXED `store.secret` (artifact ids are an
   HMAC of it, so they are deterministic), `auth.mode: keys` with one tenant (API key) per policy,
   and a policies directory holding, for every bundled preset and every budget 900 / 4,000 /
   16,000 tokens, a policy `q-<preset>-<budget>` that `extends:` the preset and sets
   `budget.context_window` / `budget.reserved_output` exactly as `bench.quality` derives them
   (allowance = budget for model gpt-4.1; the windows are written as constants below and the
   allowance is cross-checked against the manifests). The presets themselves (auto window) are
   tenants too.
2. Starts `ctxproxy serve --config <that file>` as a subprocess on a free loopback port (the
   console script next to this interpreter, i.e. of the tree whose venv runs the script; override
   with `--ctxproxy`). The upstream points at a closed loopback port: dry runs never call it.
3. Sends, to every tenant, in a fixed order and one at a time:
   - every request of `bench.quality` for `--seeds` / `--turns` (scenarios A-E of
     `bench.quality.gen.generate`, the per-turn chat-completion bodies of E included);
   - a fixed set of hand-made requests built in `dryrun_requests` (huge tool results, parallel tool
     calls, legacy function_call, broken / orphan tool messages, unknown extra fields, unicode
     escapes, n=2, tools, max_tokens variants, odd models, content parts, error cases ...);
   - with `--large`, requests of 1.2 to 21 MB in the three formats (`dryrun_large`: the bodies
     the proxy reads, parses and prepares in slices and worker threads; a large answer is
     recorded by its sha256 and size);
   - per tenant, follow-ups made from that tenant's own answers: `reprepare:` (the prepared body
     posted again), `continue:` (the prepared body plus an assistant reply and a new user turn)
     and `artifact:` (GET /v1/context/artifacts/<id> of the first artifact ids named in the
     manifests).
4. Writes one line per request to `--out`:
       {"tenant":"<tenant>","label":"<label>","status":<http status>,"response":<body>}
   where <body> is the response body exactly as received (the endpoint answers single-line JSON)
   apart from the masks below, and prints a summary (requests, outcomes per tenant/policy) and
   the sha256 of the file. With the defaults: 3,040 lines, ~120 MB, ~8 s on 2 cores.

Masked, as byte-level substitutions in the answers (nothing else is):
   - random per request, found by running the script twice: `error.ctxproxy.request_id` in error
     answers (`os.urandom` per request) -> `"request_id":"<masked>"` (exactly that 32-hex value);
   - different per venv, found by comparing two trees: absolute paths into the venv's
     site-packages, e.g. the manifest's `counting_method` for Claude models,
     `hf:/<tree>/.venv/lib/python3.11/site-packages/litellm/.../anthropic_tokenizer.json`
     -> `hf:<site-packages>/litellm/.../anthropic_tokenizer.json`.
Everything else was byte-identical over repeated runs (also with different PYTHONHASHSEEDs).

Depends only on: the `ctxproxy serve --config` CLI, the config file format (proxy/settings.py),
the bundled preset names, the policy file format (`extends`, `budget.*`), the HTTP endpoints
`POST /v1/context/prepare` and `GET /v1/context/artifacts/{id}`, and the pure request generators
`bench.quality.gen.generate` (no proxy imports). Only loopback is used.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import http.client
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common.ctxproxy_server import Server, ctxproxy_command, free_port
from bench.quality.dryrun_bodies import enc
from bench.quality.dryrun_formats import other_formats
from bench.quality.dryrun_large import large_requests, recorded
from bench.quality.dryrun_requests import follow_up_labels, handmade, quality

SECRET = "ctxproxy-dryrun-snapshot-fixed-secret"
PRESETS = ["coding-agent", "default", "example-acme", "inspect", "research-agent", "strict"]
RESERVED_OUTPUT = 512
# budget -> context_window such that allowance (window - 512 - int(0.02 * window)) == budget
# for gpt-4.1; the same numbers `bench.quality.methods.derived_policies` computes (at 8eacd47).
WINDOWS = {900: 1440, 4_000: 4604, 16_000: 16848}
QUALITY_MODEL = "gpt-4.1"
PREPARE = "/v1/context/prepare"
ARTIFACTS = "/v1/context/artifacts/"
REQUEST_ID = re.compile(rb'"request_id":"[0-9a-f]{32}"')
MASKED_ID = b'"request_id":"<masked>"'
SITE_PACKAGES = re.compile(rb'(?<=[":])/[^"\s]*?/(?:site|dist)-packages/')
MASKED_SITE = b"<site-packages>/"
ARTIFACT_ID = re.compile(r"^[A-Za-z0-9_\-:.]{8,200}$")
ARTIFACT_READS_PER_TENANT = 4


# -- config -----------------------------------------------------------------------------------


def tenants() -> list[tuple[str, str]]:
    """(tenant name == policy name, API key) in the order requests are sent."""
    names = [f"q-{preset}-{budget}" for budget in WINDOWS for preset in PRESETS] + PRESETS
    return [(name, f"sk-dryrun-{name}") for name in names]


def write_config(directory: Path) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    for preset in PRESETS:
        for budget, window in WINDOWS.items():
            (policies / f"q-{preset}-{budget}.yaml").write_text(
                f"extends: {preset}\nbudget:\n  context_window: {window}\n"
                f"  reserved_output: {RESERVED_OUTPUT}\n"
            )
    config = {
        "server": {"host": "127.0.0.1", "log_level": "WARNING", "log_format": "text"},
        "store": {"kind": "memory", "secret": SECRET},
        "upstreams": [{"name": "nowhere", "base_url": "http://127.0.0.1:9/v1", "api_key": ""}],
        "auth": {"mode": "keys", "passthrough_tenant": "default"},
        "tenants": [{"name": n, "keys": [k], "policy": n} for n, k in tenants()],
        "policies_dir": str(policies),
    }
    path = directory / "config.yaml"
    # JSON is YAML: no PyYAML needed here.
    path.write_text(json.dumps(config, indent=2))
    return path


# -- client -----------------------------------------------------------------------------------


class Client:
    """One keep-alive HTTP/1.1 connection to the proxy (reopened if the server closes it)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        key: str,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, str, bytes]:
        headers = {"Authorization": f"Bearer {key}"}
        if body is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            conn = self.conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            self.conn = conn
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                ctype = response.getheader("Content-Type", "")
                if response.will_close:
                    conn.close()
                    self.conn = None
                return response.status, ctype, data
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def artifact_ids(value: Any) -> Iterator[str]:
    """Artifact ids named in a manifest's actions (`artifact_ids` lists), in order."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "artifact_ids" and isinstance(item, list):
                yield from (i for i in item if isinstance(i, str) and ARTIFACT_ID.match(i))
            else:
                yield from artifact_ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from artifact_ids(item)


# -- run ----------------------------------------------------------------------------------------


def outcome_of(status: int, data: bytes) -> str:
    try:
        doc = json.loads(data)
    except ValueError:
        return f"{status} non-json"
    if status == 200 and isinstance(doc, dict) and isinstance(doc.get("manifest"), dict):
        return str(doc["manifest"].get("outcome"))
    if status == 200 and isinstance(doc, dict) and "artifact_id" in doc:
        return "artifact_read"
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return f"{status} {doc['error'].get('code')}"
    return f"{status} other"


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    base = quality(args.seeds, args.turns)
    quality_labels = [label for label, _, _ in base]
    made = handmade()
    labels = [label for label, _, _ in base + made]
    assert len(labels) == len(set(labels)), "duplicate labels"
    requests = base + made
    others = other_formats(requests) if args.formats == "all" else []
    others += large_requests() if args.large else []
    follow = follow_up_labels(quality_labels)
    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-dryrun-"))
    server = None
    outcomes: dict[str, collections.Counter[str]] = {}
    problems: list[str] = []
    total = 0
    try:
        config = write_config(tmp)
        port = free_port()
        argv = [
            *ctxproxy_command(args.ctxproxy),
            "serve",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        server = Server(argv, port, tmp / "server.log")
        server.wait_ready()
        client = Client(port)
        with open(args.out, "wb") as out:

            def record(tenant: str, label: str, status: int, data: bytes) -> None:
                nonlocal total
                data = SITE_PACKAGES.sub(MASKED_SITE, REQUEST_ID.sub(MASKED_ID, data))
                data = recorded(label, data)
                if b"\n" in data or b"\r" in data:
                    raise SystemExit(f"{tenant} {label}: multi-line response body")
                head = json.dumps(
                    {"tenant": tenant, "label": label, "status": status}, separators=(",", ":")
                )[:-1]
                out.write(head.encode() + b',"response":' + (data or b'""') + b"}\n")
                outcomes.setdefault(tenant, collections.Counter())[outcome_of(status, data)] += 1
                total += 1

            for tenant, key in tenants():
                answers: dict[str, dict[str, Any]] = {}
                allowances: set[Any] = set()
                for label, body, ctype in requests:
                    status, _, data = client.request("POST", PREPARE, key, body, ctype)
                    record(tenant, label, status, data)
                    if status == 200:
                        answers[label] = json.loads(data)
                    if label.startswith("quality:"):
                        allowances.add(allowance_of(status, data))
                check_allowance(tenant, allowances, problems)
                for label, path, body in others:
                    status, _, data = client.request("POST", path, key, body)
                    record(tenant, label, status, data)
                ids: list[str] = []
                for label in follow:
                    answer = answers.get(label)
                    if answer is None:
                        continue
                    prepared = answer["body"]
                    status, _, data = client.request("POST", PREPARE, key, enc(prepared))
                    record(tenant, f"reprepare:{label}", status, data)
                    more = {
                        **prepared,
                        "messages": [
                            *prepared.get("messages", []),
                            {"role": "assistant", "content": "Done with that step."},
                            {"role": "user", "content": "Good. Next step, please."},
                        ],
                    }
                    status, _, data = client.request("POST", PREPARE, key, enc(more))
                    record(tenant, f"continue:{label}", status, data)
                for label, _, _ in requests:
                    if label in answers:
                        ids += [
                            i for i in artifact_ids(answers[label].get("manifest")) if i not in ids
                        ]
                for artifact in ids[:ARTIFACT_READS_PER_TENANT]:
                    path = f"{ARTIFACTS}{artifact}?offset=100&max_chars=3000"
                    status, _, data = client.request("GET", path, key)
                    record(tenant, f"artifact:{artifact}", status, data)
                status, _, data = client.request("GET", f"{ARTIFACTS}nonexistent-id-0", key)
                record(tenant, "artifact:unknown", status, data)
                if args.verbose:
                    print(f"  {tenant}: done at {time.monotonic() - started:.1f}s", flush=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    summarize(args, outcomes, total, len(requests), time.monotonic() - started)
    for problem in problems:
        print(f"WARNING: {problem}")
    return compare(args.out, args.compare) if args.compare else 0


def compare(out: Path, reference: Path, show: int = 10) -> int:
    """Line-by-line comparison with a reference snapshot; 0 when byte-identical, else 1."""
    ours, theirs = out.read_bytes(), reference.read_bytes()
    if ours == theirs:
        print(f"identical to {reference}")
        return 0
    a, b = theirs.split(b"\n"), ours.split(b"\n")
    differing = [
        i for i in range(max(len(a), len(b))) if i >= len(a) or i >= len(b) or a[i] != b[i]
    ]
    print(
        f"DIFFERS from {reference}: {len(differing)} of {len(b)} lines "
        f"({len(a)} lines in the reference)"
    )
    for i in differing[:show]:
        line = b[i] if i < len(b) else a[i]
        key = line.split(b',"response":', 1)[0] + b"}"
        print(f"  line {i + 1}: {key.decode(errors='replace')}")
    return 1


def check_allowance(tenant: str, allowances: set[Any], problems: list[str]) -> None:
    """The derived policies must give allowance == budget for gpt-4.1 (as bench.quality's do)."""
    match = re.fullmatch(r"q-.+-(\d+)", tenant)
    if match and allowances != {int(match.group(1))}:
        problems.append(
            f"{tenant}: allowances {sorted(allowances, key=str)}, expected {match.group(1)}"
        )


def allowance_of(status: int, data: bytes) -> Any:
    """The allowance a prepare answer states: its manifest's, or a refusal's details'."""
    doc = json.loads(data)
    if status == 200:
        return doc["manifest"].get("allowance")
    return (doc.get("error", {}).get("ctxproxy") or {}).get("allowance_tokens")


def summarize(
    args: argparse.Namespace,
    outcomes: dict[str, collections.Counter[str]],
    total: int,
    per_tenant: int,
    elapsed: float,
) -> None:
    columns = sorted({o for c in outcomes.values() for o in c})
    width = max(len(t) for t in outcomes)
    print(
        f"requests: {total} ({per_tenant} fixed per tenant x {len(outcomes)} tenants, "
        f"plus per-tenant follow-ups); {elapsed:.1f}s"
    )
    print(f"{'tenant/policy':<{width}}  {'n':>4}  " + "  ".join(columns))
    for tenant, counter in outcomes.items():
        cells = "  ".join(f"{counter.get(c, 0):>{len(c)}}" for c in columns)
        print(f"{tenant:<{width}}  {sum(counter.values()):>4}  {cells}")
    digest = hashlib.sha256(Path(args.out).read_bytes()).hexdigest()
    print(f"sha256 {digest}  {args.out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path, help="output file (JSON lines)")
    parser.add_argument("--seeds", type=int, default=1, help="bench.quality seeds 1..N")
    parser.add_argument("--turns", type=int, default=40, help="turns of scenario E")
    parser.add_argument("--ctxproxy", help="ctxproxy executable (default: next to this Python)")
    parser.add_argument(
        "--compare", type=Path, help="a reference snapshot: report differing lines, exit 1 if any"
    )
    parser.add_argument(
        "--formats",
        choices=("all", "chat"),
        default="all",
        help="all: the chat requests also as Messages and Responses, plus the captured agent "
        "requests (default); chat: the chat requests only (the set before 2026-12-04)",
    )
    parser.add_argument(
        "--large",
        action="store_true",
        help="also requests of 1-21 MB in the three formats (bench/quality/dryrun_large.py)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="progress per tenant")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
