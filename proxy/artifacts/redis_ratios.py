"""`RedisCountRatios`: every replica's count ratios, merged in Redis (`tokens.calibration_sync`).

One hash per model, `{prefix}calib:<24 hex of SHA-256(model)>` with fields `r` (the running
average) and `s` (samples merged), expiring `ttl_seconds` after its last merge. A merge is one
Lua script, so concurrent replicas never lose each other's samples: n new samples of mean m move
the average as n running-average steps would, r + (1 - (1 - alpha)^n) * (m - r), clamped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis

_MERGE = """
local r = tonumber(redis.call('HGET', KEYS[1], 'r'))
local s = tonumber(redis.call('HGET', KEYS[1], 's')) or 0
local m, n, alpha = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local low, high = tonumber(ARGV[4]), tonumber(ARGV[5])
if r == nil then r = m else r = r + (1 - (1 - alpha) ^ n) * (m - r) end
r = math.min(math.max(r, low), high)
s = s + n
local text = string.format('%.9f', r)
redis.call('HSET', KEYS[1], 'r', text, 's', s)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[6]))
return {text, s}
"""

TTL_SECONDS = 7 * 24 * 3600


class RedisCountRatios:
    """Shared count ratios on the artifact store's Redis connection."""

    def __init__(
        self,
        redis: Redis,
        key_prefix: str,
        *,
        failed: Callable[[BaseException], None],
        recovered: Callable[[], None],
        failures: tuple[type[BaseException], ...],
        ttl_seconds: int = TTL_SECONDS,
    ) -> None:
        self._redis = redis
        self._prefix = key_prefix
        self._failed, self._recovered, self._failures = failed, recovered, failures
        self._ttl = ttl_seconds
        self._script = redis.register_script(_MERGE)

    def key(self, model: str) -> str:
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return f"{self._prefix}calib:{digest}"

    async def merge(
        self, samples: Mapping[str, tuple[float, int]], *, alpha: float, low: float, high: float
    ) -> dict[str, tuple[float, int]]:
        models = list(samples)
        pipe = self._redis.pipeline(transaction=False)
        for model in models:
            mean, count = samples[model]
            args: list[str | int] = [repr(float(mean)), int(count), repr(alpha), repr(low)]
            args += [repr(high), self._ttl]
            await self._script(keys=[self.key(model)], args=args, client=pipe)
        results = await self._execute(pipe)
        return _parsed(models, results)

    async def fetch(self, models: Sequence[str]) -> dict[str, tuple[float, int]]:
        wanted = list(models)
        pipe = self._redis.pipeline(transaction=False)
        for model in wanted:
            pipe.hmget(self.key(model), ["r", "s"])
        return _parsed(wanted, await self._execute(pipe))

    async def _execute(self, pipe: Any) -> list[Any]:
        try:
            results: list[Any] = await pipe.execute(raise_on_error=False)
        except self._failures as exc:
            self._failed(exc)
            return []
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            self._failed(errors[0])
        else:
            self._recovered()
        return results


def _parsed(models: list[str], results: list[Any]) -> dict[str, tuple[float, int]]:
    """(ratio, samples) per model from `[ratio, samples]` replies; missing or odd ones left out."""
    found: dict[str, tuple[float, int]] = {}
    for model, reply in zip(models, results, strict=False):
        if not isinstance(reply, list | tuple) or len(reply) != 2 or None in reply:
            continue
        try:
            found[model] = (float(reply[0]), int(reply[1]))
        except (TypeError, ValueError):
            continue
    return found
