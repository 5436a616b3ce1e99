"""Dry-run snapshot: the exact `POST /v1/context/prepare` answers of a fixed request set.

Evidence that a refactor leaves behaviour unchanged: run this script in the tree before and after
the refactor (each with its own venv) and compare the two output files byte for byte (`cmp`, the
printed sha256, or `--compare <reference>`, which also names the first differing requests).

    python -m bench.quality.dryrun_snapshot --out /tmp/dryrun.jsonl [--seeds 1] [--turns 40]
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
   - a fixed set of hand-made requests built in this file (huge tool results, parallel tool
     calls, legacy function_call, broken / orphan tool messages, unknown extra fields, unicode
     escapes, n=2, tools, max_tokens variants, odd models, content parts, error cases ...);
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
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common.ctxproxy_server import Server, ctxproxy_command, free_port
from bench.quality.gen import generate

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


# -- hand-made requests -----------------------------------------------------------------------

_VOCABULARY = (
    "def return import class self value result error test build module cache index request "
    "response handler config path file line status pass fail assert expected actual token "
    "budget window policy stream chunk upstream proxy latency queue worker retry timeout "
    "the a of to in and for is on with that this from by at as it be are was or not"
)
_WORDS = _VOCABULARY.split()
_CJK = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你能"


def text(rng: random.Random, chars: int, *, cjk: bool = False) -> str:
    """Code/log-ish text of exactly `chars` characters."""
    out: list[str] = []
    size = 0
    while size < chars:
        if cjk:
            line = "".join(rng.choice(_CJK) for _ in range(rng.randint(8, 40)))
        else:
            line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))
        line = f"{rng.randint(1, 9999):>5}: {line}"
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)[:chars]


def tool(name: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {
                "type": "object",
                "properties": {k: {"type": t} for k, t in params.items()},
                "required": list(params),
            },
        },
    }


TOOLS = [
    tool("read_file", path="string"),
    tool("grep", pattern="string"),
    tool("todo_write", items="string"),
    tool("acme_lookup", id="string"),
    tool("fetch_url", url="string"),
    tool("run_tests", target="string"),
]


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def calls_msg(calls: list[dict[str, Any]], content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": calls}


def result(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def agent(
    rng: random.Random,
    exchanges: int,
    sizes: tuple[int, int],
    *,
    names: list[str],
    prefix: str = "call",
    model: str = "gpt-4o",
) -> dict[str, Any]:
    """system + task + `exchanges` (user note, tool call, tool result) + a final user turn."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent. Use the tools."},
        {"role": "user", "content": "Task: make the test suite pass. " + text(rng, 300)},
    ]
    for n in range(exchanges):
        name = names[n % len(names)]
        cid = f"{prefix}_{n:03d}"
        note = text(rng, rng.randint(40, 200))
        messages.append({"role": "user", "content": f"Step {n}: {note}"})
        messages.append(calls_msg([call(cid, name, {"path": f"src/m{n}.py"})]))
        messages.append(result(cid, text(rng, rng.randint(*sizes))))
    messages.append({"role": "user", "content": "Now fix the failing test and explain why."})
    return {"model": model, "messages": messages, "tools": TOOLS}


def enc(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def handmade() -> list[tuple[str, bytes, str]]:
    """(label, raw body, content type): deterministic, built without any proxy code."""
    rng = random.Random("ctxproxy-dryrun-snapshot")
    out: list[tuple[str, bytes, str]] = []

    def add(label: str, body: Any, ctype: str = "application/json") -> None:
        out.append((label, body if isinstance(body, bytes) else enc(body), ctype))

    add(
        "chat-small",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hello!"},
            ],
        },
    )

    huge = agent(rng, 2, (500, 2000), names=["read_file"])
    huge["messages"][-1:-1] = [
        calls_msg([call("call_huge", "read_file", {"path": "dump.log"})]),
        result("call_huge", text(rng, 300_000)),
    ]
    add("huge-tool-result", huge)

    add(
        "agent-20-exchanges",
        agent(rng, 20, (500, 12_000), names=["read_file", "grep", "run_tests"]),
    )
    add("agent-60-exchanges-small", agent(rng, 60, (100, 900), names=["grep", "read_file"]))

    par = agent(rng, 1, (200, 400), names=["read_file"], prefix="seq")
    tail = par["messages"].pop()
    for r in range(6):
        ids = [f"par_{r}_{k}" for k in range(4)]
        names = ["read_file", "grep", "todo_write", "acme_lookup"]
        par["messages"].append(
            calls_msg(
                [call(i, n, {"q": f"{n}-{r}"}) for i, n in zip(ids, names, strict=True)],
                content="Looking at several things at once.",
            )
        )
        for i, n in zip(ids, names, strict=True):
            size = 9_000 if n == "read_file" else (300 if n == "todo_write" else 5_000)
            par["messages"].append(result(i, text(rng, size)))
    par["messages"].append(tail)
    par["parallel_tool_calls"] = True
    add("parallel-tool-calls", par)

    legacy: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Old-style function calling."},
            {"role": "user", "content": "Look up the weather in several cities."},
        ],
        "functions": [
            {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        "function_call": "auto",
    }
    for k in range(8):
        legacy["messages"].append(
            {
                "role": "assistant",
                "content": None,
                "function_call": {
                    "name": "get_weather",
                    "arguments": json.dumps({"city": f"city-{k}"}),
                },
            }
        )
        legacy["messages"].append(
            {"role": "function", "name": "get_weather", "content": text(rng, 9_000)}
        )
    legacy["messages"].append({"role": "user", "content": "Summarise."})
    add("legacy-function-call", legacy)

    orphan = agent(rng, 8, (2_000, 9_000), names=["read_file"])
    orphan["messages"].insert(3, result("call_nobody", text(rng, 10_000)))
    add("orphan-tool-result", orphan)

    missing = agent(rng, 8, (2_000, 9_000), names=["read_file"])
    missing["messages"].insert(3, calls_msg([call("call_unanswered", "grep", {"q": "x"})]))
    add("missing-tool-result", missing)

    dup = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    dup["messages"][-1:-1] = [
        calls_msg([call("call_000", "grep", {"q": "dup"})]),
        result("call_000", text(rng, 3_000)),
    ]
    add("duplicate-tool-call-id", dup)

    wrong_order = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    m = wrong_order["messages"]
    m[4], m[5] = m[5], m[4]  # a result before its call
    add("result-before-call", wrong_order)

    extra = agent(rng, 10, (1_000, 9_000), names=["read_file", "grep"])
    extra.update(
        {
            "x_trace": {"span": "abc", "deep": [1, 2.5, None, True]},
            "metadata": {"a": "b"},
            "user": "user-42",
            "temperature": 0.2,
            "seed": 7,
            "logit_bias": {"50256": -100},
            "response_format": {"type": "json_object"},
            "store": False,
        }
    )
    for msg in extra["messages"]:
        msg["x_note"] = {"kept": True}
        for c in msg.get("tool_calls") or []:
            c["x_call_extra"] = 1
    extra["messages"][1]["name"] = "alice"
    add("unknown-extra-fields", extra)

    # Unicode written as JSON escapes (ASCII-only bytes), incl. a surrogate pair, U+2028, NUL.
    esc = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    esc["messages"][1]["content"] = "caf\u00e9 \U0001f600 \u2028 line\u2029sep \x00nul \u202e rtl"
    esc["messages"][5]["content"] = "\U0001f600" * 2_000 + "\u00e9" * 3_000
    add("unicode-escapes", json.dumps(esc, ensure_ascii=True).encode())
    raw = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    raw["messages"][5]["content"] = text(rng, 12_000, cjk=True)
    raw["messages"][2]["content"] = "e\u0301 n\u0303 \U0001f469\u200d\U0001f4bb  " * 50
    add("unicode-raw-utf8", raw)
    add("lone-surrogate", b'{"model":"gpt-4o","messages":[{"role":"user","content":"\\ud800x"}]}')
    add(
        "escaped-slash-and-whitespace",
        b'{ "model" : "gpt-4o" ,\n "messages" : [ {"role":'
        b'"user","content":"a\\/b \\"q\\" \\t\\n"} ] , "max_tokens" : 10 }\n',
    )

    n2 = agent(rng, 12, (1_000, 9_000), names=["read_file", "grep"])
    n2["n"] = 2
    add("n-2", n2)

    tc = agent(rng, 12, (1_000, 9_000), names=["read_file", "grep"])
    tc["tool_choice"] = {"type": "function", "function": {"name": "read_file"}}
    tc["parallel_tool_calls"] = False
    add("tools-tool-choice", tc)
    notools = agent(rng, 12, (1_000, 9_000), names=["read_file"])
    del notools["tools"]
    add("tool-calls-without-tools", notools)

    variants: list[tuple[str, dict[str, Any]]] = [
        ("max-tokens-100", {"max_tokens": 100}),
        ("max-completion-tokens-3000", {"max_completion_tokens": 3000}),
        ("max-tokens-both", {"max_tokens": 50, "max_completion_tokens": 2000}),
        ("max-tokens-huge", {"max_tokens": 2_000_000}),
        ("max-tokens-zero", {"max_tokens": 0}),
        ("max-tokens-string", {"max_tokens": "100"}),
        ("max-tokens-null", {"max_tokens": None}),
    ]
    for label, fields in variants:
        body = agent(random.Random(label), 10, (1_000, 6_000), names=["read_file", "grep"])
        body.update(fields)
        add(label, body)

    stream = agent(rng, 10, (1_000, 9_000), names=["read_file"])
    stream.update({"stream": True, "stream_options": {"include_usage": True}})
    add("stream", stream)

    parts = agent(rng, 8, (1_000, 9_000), names=["read_file"])
    parts["messages"][1]["content"] = [
        {"type": "text", "text": "Look at this screenshot."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 300}},
        {"type": "text", "text": text(rng, 2_000)},
    ]
    parts["messages"][5]["content"] = [{"type": "text", "text": text(rng, 15_000)}]
    add("content-parts", parts)

    roles = agent(rng, 8, (1_000, 9_000), names=["read_file"])
    roles["messages"].insert(1, {"role": "developer", "content": "Developer instructions."})
    roles["messages"].insert(3, {"role": "system", "content": "A second system message."})
    roles["messages"].insert(9, {"role": "system", "content": "A system message mid-way."})
    add("developer-and-system-roles", roles)

    pinned = agent(rng, 15, (1_000, 9_000), names=["read_file", "grep"])
    pinned["messages"].insert(
        3, {"role": "user", "content": "ACCEPTANCE CRITERIA: all green. " + text(rng, 1_500)}
    )
    add("pinned-acceptance-criteria", pinned)

    excluded = agent(rng, 10, (6_000, 12_000), names=["todo_write", "acme_lookup", "fetch_url"])
    add("excluded-and-refetchable-tools", excluded)

    chatter: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "You are a helpful assistant."}],
    }
    for _ in range(100):
        question = text(rng, rng.randint(50, 600))
        chatter["messages"].append({"role": "user", "content": question})
        answer = text(rng, rng.randint(50, 900))
        chatter["messages"].append({"role": "assistant", "content": answer})
    add("long-chatter-no-tools", chatter)

    js = agent(rng, 6, (100, 200), names=["acme_lookup"])
    for k, msg in enumerate(js["messages"]):
        if msg["role"] == "tool":
            msg["content"] = json.dumps(
                {
                    "rows": [
                        {"id": i, "name": f"row-{k}-{i}", "tags": ["a", "b"], "score": i * 0.5}
                        for i in range(300)
                    ]
                },
                indent=2,
            )
    add("verbose-json-tool-results", js)

    clash = agent(rng, 8, (1_000, 9_000), names=["read_file"])
    clash["tools"] = [*TOOLS, tool("read_context_artifact", artifact_id="string")]
    add("client-tool-named-like-read-tool", clash)

    for label, model in [
        ("model-gpt-4-8k", "gpt-4"),
        ("model-claude", "claude-3-5-sonnet-20241022"),
        ("model-unknown", "my-local-model"),
        ("model-azure-prefixed", "azure/eu/gpt-4o-2024-08-06"),
        ("model-o3-mini", "o3-mini"),
        ("model-gpt-4o-mini", "gpt-4o-mini"),
    ]:
        add(
            label,
            agent(
                random.Random(label), 16, (1_000, 9_000), names=["read_file", "grep"], model=model
            ),
        )
    nomodel = agent(rng, 3, (100, 300), names=["read_file"])
    del nomodel["model"]
    add("model-missing", nomodel)
    add("model-not-string", {"model": 123, "messages": [{"role": "user", "content": "x"}]})

    add("messages-empty", {"model": "gpt-4o", "messages": []})
    add("messages-missing", {"model": "gpt-4o"})
    add("messages-not-list", {"model": "gpt-4o", "messages": {"role": "user"}})
    add("message-not-object", {"model": "gpt-4o", "messages": ["hello"]})
    add("message-role-missing", {"model": "gpt-4o", "messages": [{"content": "hi"}]})
    add(
        "message-role-unknown",
        {"model": "gpt-4o", "messages": [{"role": "wizard", "content": "hi"}]},
    )
    add("user-content-null", {"model": "gpt-4o", "messages": [{"role": "user", "content": None}]})
    add(
        "tool-content-number",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": "x"},
                calls_msg([call("c1", "grep", {})]),
                result("c1", 42),
                {"role": "user", "content": "y"},
            ],
        },
    )
    add(
        "tool-calls-malformed",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": 5}]},
                {"role": "user", "content": "y"},
            ],
        },
    )
    add("invalid-json", b'{"model":"gpt-4o","messages":[')
    add("json-array", b'[{"model":"gpt-4o"}]')
    add("empty-body", b"")
    add(
        "duplicate-keys",
        b'{"model":"gpt-4o","model":"gpt-4","messages":[{"role":"user","content":"a"}]}',
    )
    add(
        "text-plain",
        enc({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}),
        "text/plain",
    )
    add(
        "vendor-json-type",
        enc({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}),
        "application/vnd.acme+json; charset=utf-8",
    )
    return out


def quality(seeds: int, turns: int) -> list[tuple[str, bytes, str]]:
    out = []
    for seed in range(1, seeds + 1):
        for scenario in generate(seed, growing_turns=turns):
            for i, request in enumerate(scenario.requests):
                label = f"quality:s{seed}:{scenario.key}:{i:03d}"
                out.append((label, enc(request.body), "application/json"))
    return out


# -- follow-ups from a tenant's own answers -----------------------------------------------------

FOLLOW_UP = (
    "huge-tool-result",
    "agent-20-exchanges",
    "parallel-tool-calls",
    "legacy-function-call",
    "long-chatter-no-tools",
    "unicode-escapes",
    "n-2",
    "orphan-tool-result",
    "model-gpt-4-8k",
)


def follow_up_labels(quality_labels: list[str]) -> list[str]:
    """Hand-made ones plus the last request of each quality scenario."""
    last: dict[str, str] = {}
    for label in quality_labels:
        last[label.rsplit(":", 1)[0]] = label
    return [*FOLLOW_UP, *last.values()]


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
    parser.add_argument("-v", "--verbose", action="store_true", help="progress per tenant")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
