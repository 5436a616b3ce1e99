"""Run the real Claude Code and Codex CLIs through ctxproxy against a scripted fake upstream.

    python -m bench.agents install [--prefix DIR] [--claude-version V] [--codex-version V]
    python -m bench.agents run [--cli claude|codex|both] [--out DIR] [--capture-fixtures DIR]

The pieces (each a module of this package):

- `install`: the CLIs from npm into a prefix outside the repository (never committed, never CI);
- `fake_upstream` (+ `fake_anthropic`, `fake_responses`): a loopback aiohttp server speaking
  Anthropic Messages and OpenAI Responses that scripts a short coding loop per turn (a shell call
  with a large output, then the final text) and records every prepared body the proxy sent;
- `recorder`: a recording pass-through between the CLI and the proxy (the client's own bodies,
  request headers and the proxy's `x-ctxproxy-*` answer headers);
- `proxy_proc`: the proxy from this source tree in a subprocess, its JSON access lines parsed;
- `clients`: the CLI invocations (three turns each) in throw-away homes and workspaces;
- `analysis` / `report`: one row per request (tokens, actions, outcome, tool share, cache marks,
  prefix kept) printed and written as JSON;
- `fixtures`: scrubbed client bodies for CI tests (`tests/fixtures/agents/`).

See `bench/agents/README.md`.
"""
