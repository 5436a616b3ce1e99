"""Overhead: what ctxproxy adds to a request (latency, throughput, CPU, memory, start-up) against a
direct call, a minimal forwarder and LiteLLM's proxy, and what preparing a request costs in-process
(chat and Responses histories, Redis round trips). See bench/overhead/README.md."""
