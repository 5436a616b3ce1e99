"""Driver of bench/real_upstream/run.sh: a conversation that outgrows a real llama.cpp server's
window (`python -m bench.real_upstream.driver run|export-tokenizer`, in the llama venv).

`run`: grows one conversation turn by turn (a user message carrying pasted tool-like output, then
the model's own answer) with the `openai` SDK, once straight to the llama.cpp server and once
through ctxproxy per tokenizer variant (one ctxproxy tenant key each), and prints Markdown: the
per-turn table and the summary (first failing direct turn, proxied successes, calibration =
ctxproxy's count / the server's `usage.prompt_tokens`).

`export-tokenizer`: writes a Hugging Face tokenizer.json built from a GGUF file's own vocabulary
and merges (so that ctxproxy can count with `hf:<path>`), and checks it against llama.cpp's
tokenizer. Runs in bench/.llama-venv (needs `gguf` and `llama_cpp`).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import openai

from bench.real_upstream.reeval import MARKER_PATH, evaluated_from_log, floor_tokens
from bench.real_upstream.report import Call, reeval_table, summary, turn_table
from bench.real_upstream.tokenizer import export_tokenizer

SYSTEM = "You are a concise coding assistant. Answer in one or two short sentences."
TASK = (
    "We are debugging a flaky payment service. I will paste command output turn by turn; "
    "after each paste, tell me in one sentence what stands out."
)
FAILED_ANSWER = "(no answer: the request failed)"
# llama-cpp-python's context_length_exceeded message, which carries its own prompt count.
_REQUESTED = re.compile(r"\((\d+) in the messages")
_WORDS = [
    "retry",
    "timeout",
    "ledger",
    "invoice",
    "refund",
    "webhook",
    "settle",
    "capture",
    "batch",
    "queue",
    "worker",
    "shard",
    "lock",
    "cursor",
    "replica",
    "commit",
    "rollback",
    "checksum",
    "nonce",
    "token",
    "session",
    "gateway",
    "merchant",
]


def pasted_output(turn: int) -> str:
    """Tool-like text of roughly 150-250 tokens, the same for every run (seeded by the turn)."""
    rng = random.Random(turn)
    kind = turn % 3
    if kind == 0:
        lines = [f"$ pytest tests/test_{rng.choice(_WORDS)}.py -q"]
        for _ in range(9):
            name = f"test_{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"
            verdict = rng.choice(["PASSED", "PASSED", "PASSED", "FAILED"])
            where = f"tests/test_{rng.choice(_WORDS)}.py::{name}"
            lines.append(f"{where} {verdict} [{rng.randint(1, 99)}%]")
        got, want = rng.randint(100, 999), rng.randint(100, 999)
        lines.append(f"E   AssertionError: expected {got} == {want}")
    elif kind == 1:
        lines = [f"$ grep -rn {rng.choice(_WORDS)} src/"]
        for _ in range(8):
            a, b = rng.choice(_WORDS), rng.choice(_WORDS)
            lines.append(
                f"src/{a}/{b}.py:{rng.randint(10, 400)}:    {a}_{b} = await {b}.fetch({a}, "
                f"timeout={rng.randint(1, 30)})"
            )
    else:
        lines = [f"$ tail -n 8 logs/{rng.choice(_WORDS)}.log"]
        for _ in range(8):
            lines.append(
                f"2025-03-{rng.randint(10, 28)} 12:{rng.randint(10, 59)}:{rng.randint(10, 59)} "
                f"{rng.choice(['INFO', 'WARN', 'ERROR'])} {rng.choice(_WORDS)}: "
                f"{rng.choice(_WORDS)} {rng.choice(_WORDS)} took {rng.randint(5, 9000)} ms "
                f"(attempt {rng.randint(1, 5)})"
            )
    return "\n".join(lines)


def user_message(turn: int) -> dict[str, Any]:
    head = TASK + "\n\n" if turn == 1 else f"Turn {turn}. "
    return {"role": "user", "content": f"{head}Output:\n{pasted_output(turn)}\nWhat stands out?"}


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    return int(value) if value is not None and value.isdigit() else None


def call(
    client: openai.OpenAI, model: str, messages: list[dict[str, Any]], max_tokens: int, turn: int
) -> Call:
    start = time.perf_counter()
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            temperature=0,  # type: ignore[arg-type]
        )
    except openai.APIStatusError as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        message = str(body.get("message") or exc.message)
        code = body.get("code") or body.get("type") or ""
        requested = _REQUESTED.search(message)
        headers = exc.response.headers
        return Call(
            turn,
            len(messages),
            False,
            exc.status_code,
            time.perf_counter() - start,
            prompt_tokens=int(requested.group(1)) if requested else None,
            error=f"{code}: {message}" if code else message,
            tokens_before=_int_header(headers, "x-ctxproxy-tokens-before"),
            tokens_after=_int_header(headers, "x-ctxproxy-tokens-after"),
            actions=headers.get("x-ctxproxy-actions"),
            summary=headers.get("x-ctxproxy-summary"),
        )
    except openai.APIConnectionError as exc:
        return Call(turn, len(messages), False, 0, time.perf_counter() - start, error=repr(exc))
    completion = raw.parse()
    usage, choice = completion.usage, completion.choices[0]
    return Call(
        turn,
        len(messages),
        True,
        raw.http_response.status_code,
        time.perf_counter() - start,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        finish_reason=choice.finish_reason,
        tokens_before=_int_header(raw.headers, "x-ctxproxy-tokens-before"),
        tokens_after=_int_header(raw.headers, "x-ctxproxy-tokens-after"),
        actions=raw.headers.get("x-ctxproxy-actions"),
        summary=raw.headers.get("x-ctxproxy-summary"),
        answer=(choice.message.content or "").strip(),
    )


def prepare(proxy: str, key: str, body: dict[str, Any]) -> dict[str, Any]:
    """ctxproxy's dry run (POST /v1/context/prepare: no upstream call): body and manifest."""
    request = urllib.request.Request(
        f"{proxy}/context/prepare",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        result: dict[str, Any] = json.load(response)
    return result


def dry_run(proxy: str, key: str, body: dict[str, Any]) -> tuple[int, str]:
    """ctxproxy's count of a body, and its counting method."""
    manifest = prepare(proxy, key, body)["manifest"]
    return int(manifest["tokens_before"]), str(manifest["counting_method"])


def inspect_reduction(proxy: str, key: str, body: dict[str, Any], result: Call) -> None:
    """For a reduced call: how many messages went upstream, and ctxproxy's count of them without
    the synthetic read tools it appended (a chat template may not render `tools` at all)."""
    prepared = prepare(proxy, key, body)["body"]
    result.forwarded = len(prepared["messages"])
    if prepared.pop("tools", None) is not None:
        prepared.pop("tool_choice", None)
        result.without_tools = dry_run(proxy, key, prepared)[0]


def converse(
    client: openai.OpenAI,
    args: argparse.Namespace,
    label: str,
    dry_keys: dict[str, str],
    own_key: str | None = None,
) -> list[Call]:
    """One conversation; `dry_keys` (direct run): count every body with these ctxproxy keys;
    `own_key` (proxied run): inspect every reduced request with this key."""
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    calls = []
    for turn in range(1, args.turns + 1):
        history.append(user_message(turn))
        result = call(client, args.model, history, args.max_tokens, turn)
        body = {"model": args.model, "messages": history, "max_tokens": args.max_tokens}
        for variant, key in dry_keys.items():
            result.dry_run[variant] = dry_run(args.proxy, key, body)[0]
        if own_key and result.actions not in (None, "none"):
            inspect_reduction(args.proxy, own_key, body, result)
        calls.append(result)
        history.append({"role": "assistant", "content": result.answer or FAILED_ANSWER})
        status = "ok" if result.ok else f"{result.status} {result.error}"
        counted = (
            f"{result.tokens_before}->{result.tokens_after} {result.actions}"
            if result.actions is not None
            else f"dry run {result.dry_run}"
        )
        print(
            f"[{label}] turn {turn}: {result.messages} msgs, prompt_tokens="
            f"{result.prompt_tokens}, ctxproxy {counted}, {status} ({result.seconds:.1f}s)",
            file=sys.stderr,
        )
    return calls


def turn_facts(turn: int) -> list[str]:
    """What a later turn may need of `turn`: its command line and, for a test run, the failed
    assertion (identifiers and numbers stated once, in that turn only)."""
    lines = pasted_output(turn).splitlines()
    facts = [lines[0].removeprefix("$ ")]
    facts += [line.removeprefix("E   ") for line in lines if line.startswith("E   ")]
    return facts


def last_body(turns: int, model: str, max_tokens: int) -> dict[str, Any]:
    """The last turn's request of a conversation of `turns` turns, every answer "noted"."""
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(1, turns + 1):
        history.append(user_message(turn))
        if turn < turns:
            history.append({"role": "assistant", "content": "noted"})
    return {"model": model, "messages": history, "max_tokens": max_tokens}


def facts_kept(sent: list[dict[str, Any]], turns: int) -> tuple[int, int]:
    """Of the facts of the turns that `sent` (the messages as prepared) no longer carries
    (dropped or summarized), how many are still in its text, and how many."""
    text = json.dumps(sent, ensure_ascii=False)
    kept = {m.get("content") for m in sent if m.get("role") == "user"}
    gone = [t for t in range(1, turns + 1) if user_message(t)["content"] not in kept]
    facts = [f for t in gone for f in turn_facts(t)]
    return sum(json.dumps(f, ensure_ascii=False)[1:-1] in text for f in facts), len(facts)


def facts_inline(proxy: str, key: str, args: argparse.Namespace) -> tuple[int, int]:
    """At the last turn's body as ctxproxy prepares it: `facts_kept`."""
    body = last_body(args.turns, args.model, args.max_tokens)
    return facts_kept(prepare(proxy, key, body)["body"]["messages"], args.turns)


def run(args: argparse.Namespace) -> int:
    variants = dict(v.split("=", 1) for v in args.variant)
    main = next(iter(variants))
    probe = {
        "model": args.model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": args.max_tokens,
    }
    methods = {name: dry_run(args.proxy, key, probe)[1] for name, key in variants.items()}
    methods = {name: re.sub(r"^hf:.*/", "hf:.../", m) for name, m in methods.items()}
    direct_client = openai.OpenAI(
        base_url=args.direct, api_key="sk-no-key-needed", max_retries=0, timeout=600
    )
    mark(args.direct, "direct")
    direct = converse(direct_client, args, "direct", variants)
    runs = {}
    for name, key in variants.items():
        client = openai.OpenAI(base_url=args.proxy, api_key=key, max_retries=0, timeout=600)
        mark(args.direct, name)
        runs[name] = converse(client, args, name, {}, key)
    mark(args.direct, "end")
    kept = {name: facts_inline(args.proxy, key, args) for name, key in variants.items()}
    lines = [
        f"Model `{args.model}`, n_ctx {args.window}, max_tokens {args.max_tokens}, temperature 0, "
        f"{args.turns} turns; ctxproxy variants: "
        + ", ".join(f"`{n}` ({methods[n]})" for n in variants),
        "",
        f"### Per turn (ctxproxy with `{main}`)",
        "",
        *turn_table(direct, runs[main], main),
        *summary(direct, runs, methods, args.window),
        "",
        "Facts of the turns no longer sent (each turn's command line and failed assertion), still "
        "in the prompt at the last turn (ctxproxy's dry run of the whole history):",
        "",
        *(f"- {name}: {k}/{n}" for name, (k, n) in kept.items()),
        *reevaluated(args, direct, runs),
    ]
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "direct": [asdict(c) for c in direct],
                    "proxied": {n: [asdict(c) for c in calls] for n, calls in runs.items()},
                    "methods": methods,
                },
                indent=1,
            )
        )
    return 0


def mark(direct: str, label: str) -> None:
    """A line in the server's access log where `label`'s conversation starts (`reeval`)."""
    with urllib.request.urlopen(f"{direct}{MARKER_PATH}{label}", timeout=30) as answer:
        answer.read()


def reevaluated(
    args: argparse.Namespace, direct: list[Call], runs: dict[str, list[Call]]
) -> list[str]:
    """The prompt tokens the server evaluated per conversation (its log) and the floor."""
    if not args.llama_log:
        return []
    evaluated = evaluated_from_log(args.llama_log)
    floors: dict[str, int] = {}
    if args.tokenizer:
        from tokenizers import Tokenizer

        encoder = Tokenizer.from_file(args.tokenizer)
        users = [user_message(t)["content"] for t in range(1, args.turns + 1)]
        floors = {name: floor_tokens(encoder, SYSTEM, users) for name in ["direct", *runs]}
    return reeval_table(evaluated, floors, {"direct": direct, **runs}, args.window)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="drive the conversation and print the tables")
    r.add_argument("--direct", required=True, help="llama.cpp server base URL (…/v1)")
    r.add_argument("--proxy", required=True, help="ctxproxy base URL (…/v1)")
    r.add_argument("--model", required=True)
    r.add_argument("--window", type=int, default=2048, help="the server's n_ctx")
    r.add_argument("--turns", type=int, default=32)
    r.add_argument("--max-tokens", type=int, default=48)
    r.add_argument(
        "--variant",
        action="append",
        required=True,
        help="LABEL=PROXY_KEY, one per ctxproxy tenant (the first is the main one)",
    )
    r.add_argument("--json", help="also write every call here")
    r.add_argument("--llama-log", help="the server's log: prompt tokens evaluated per variant")
    r.add_argument("--tokenizer", help="the model's tokenizer.json: the perfect-cache floor")
    e = sub.add_parser("export-tokenizer", help="GGUF vocabulary -> tokenizer.json")
    e.add_argument("gguf")
    e.add_argument("out")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args)
    texts = [SYSTEM, TASK, *(user_message(t)["content"] for t in range(1, 41))]
    return export_tokenizer(args.gguf, args.out, texts)


if __name__ == "__main__":
    sys.exit(main())
