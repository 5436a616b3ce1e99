"""Sustained load: a mixed workload at a fixed rate against `ctxproxy serve` with Redis, for
minutes (latency per minute, RSS and open file descriptors). See bench/soak/README.md."""
