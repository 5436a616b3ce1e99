"""Hostile input: generated requests (fuzz and attack cases) through a real `ctxproxy serve` in
front of scripted fake upstreams, on chat completions, `/v1/responses` and Anthropic Messages,
and `/healthz` availability under hostile load and compressed bombs. See bench/hostile/README.md."""
