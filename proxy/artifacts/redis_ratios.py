"""`RedisCountRatios`: every replica's count ratios, merged in Redis (`tokens.calibration_sync`).

One hash per upstream and model, `{prefix}ratios:<24 hex of SHA-256 of both names>`:
field `c:<contributor>` holds a contributor's "ratio average samples updated" (the contributor is
already a hash of a scope: `tokens.calibration_rule.contributor_id`), field `a` the agreed
ratio; the hash expires `rule.ttl_seconds` after its last merge. A merge is one Lua script per
key (`tokens.calibration_rule`, the same rule as in Python: each of n samples of mean m moves a
contributor's ratio one bounded step, a newcomer gets a field only while there are fewer than
`max_contributors`, contributors without a sample for `ttl_seconds` are dropped, and the agreed
ratio moves at most one step per sample toward the median of the calibrated contributors once
`quorum` of them are), so concurrent replicas never lose each other's samples. Every key a sync
pushes or reads goes in one pipeline: one round trip (plus one to load the script after a
Redis restart).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from redis.exceptions import NoScriptError

from proxy.artifacts.redis_clients import RedisClient

_MERGE = """
local now, alpha = tonumber(ARGV[1]), tonumber(ARGV[2])
local low, high = tonumber(ARGV[3]), tonumber(ARGV[4])
local step, least, quorum = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cap, ttl, most_steps = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local function clamp(x, a, b) return math.min(math.max(x, a), b) end
local flat = redis.call('HGETALL', KEYS[1])
local agreed, entries, count = 1.0, {}, 0
for i = 1, #flat, 2 do
  if flat[i] == 'a' then
    agreed = tonumber(flat[i + 1]) or 1.0
  elseif string.sub(flat[i], 1, 2) == 'c:' then
    local r, v, s, t = string.match(flat[i + 1], '^(%S+) (%S+) (%S+) (%S+)$')
    r, v, s, t = tonumber(r), tonumber(v), tonumber(s), tonumber(t)
    if r and v and s and t and t >= now - ttl then
      entries[flat[i]] = {r, v, s, t}; count = count + 1
    end
  end
end
local merged = 0
for i = 11, #ARGV, 3 do
  local name, m, n = 'c:' .. ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local e = entries[name]
  if e == nil and count < cap then e = {1.0, 1.0, 0, now}; entries[name] = e; count = count + 1 end
  if e ~= nil then
    for k = e[3], e[3] + math.min(n, most_steps) - 1 do
      e[2] = clamp(e[2] + math.max(1 / (k + 1), alpha) * (m - e[2]), low, high)
      e[1] = e[1] + clamp(e[2] - e[1], -step, step)
    end
    e[3], e[4], merged = e[3] + n, math.max(e[4], now), merged + n
  end
end
local calibrated = {}
for _, e in pairs(entries) do if e[3] >= least then table.insert(calibrated, e[1]) end end
table.sort(calibrated)
local c, target = #calibrated, 1.0
if c >= quorum and c > 0 then
  local h = math.floor(c / 2)
  if c % 2 == 1 then target = calibrated[h + 1]
  else target = (calibrated[h] + calibrated[h + 1]) / 2 end
end
local reply = {}
if merged > 0 then
  agreed = clamp(agreed + clamp(target - agreed, -step * merged, step * merged), low, high)
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'a', string.format('%.9f', agreed))
end
reply[1] = string.format('%.9f', agreed)
for name, e in pairs(entries) do
  local text = string.format('%.9f %.9f %d %.3f', e[1], e[2], e[3], e[4])
  if merged > 0 then redis.call('HSET', KEYS[1], name, text) end
  table.insert(reply, string.sub(name, 3))
  table.insert(reply, text)
end
if merged > 0 then redis.call('EXPIRE', KEYS[1], math.ceil(ttl)) end
return reply
"""

MOST_STEPS = 100
"""n samples of one mean count as at most this many steps (`MAX_STEPS_PER_MERGE` in Python)."""

SharedKey = tuple[float, dict[str, tuple[float, float, int, float]]]


class MergeRule(Protocol):
    """The numbers of `tokens.calibration_rule.RatioRule` the merge uses."""

    @property
    def alpha(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    @property
    def step(self) -> float: ...
    @property
    def min_samples(self) -> int: ...
    @property
    def quorum(self) -> int: ...
    @property
    def max_contributors(self) -> int: ...
    @property
    def ttl_seconds(self) -> float: ...


class RedisCountRatios:
    """Shared count ratios on the artifact store's Redis connection."""

    def __init__(
        self,
        redis: RedisClient,
        key_prefix: str,
        *,
        failed: Callable[[BaseException], None],
        recovered: Callable[[], None],
        failures: tuple[type[BaseException], ...],
    ) -> None:
        self._redis = redis
        self._prefix = key_prefix
        self._failed, self._recovered, self._failures = failed, recovered, failures
        self._sha = hashlib.sha1(_MERGE.encode()).hexdigest()

    def key(self, upstream: str, model: str) -> str:
        name = upstream.encode("utf-8", "surrogatepass")
        text = b"%d:%s%s" % (len(name), name, model.encode("utf-8", "surrogatepass"))
        return f"{self._prefix}ratios:{hashlib.sha256(text).hexdigest()[:24]}"

    async def exchange(
        self,
        pushed: Mapping[tuple[str, str], Mapping[str, tuple[float, int]]],
        wanted: Sequence[tuple[str, str]],
        *,
        rule: MergeRule,
        now: float,
    ) -> dict[tuple[str, str], SharedKey]:
        keys = [*pushed, *(k for k in wanted if k not in pushed)]
        if not keys:
            return {}
        head: list[str | int] = [repr(float(now))]
        head += [repr(float(x)) for x in (rule.alpha, rule.low, rule.high, rule.step)]
        head += [int(rule.min_samples), int(rule.quorum), int(rule.max_contributors)]
        head += [repr(float(rule.ttl_seconds)), MOST_STEPS]
        calls = [(self.key(*key), [*head, *_samples(pushed.get(key, {}))]) for key in keys]
        results = await self._run(calls)
        found: dict[tuple[str, str], SharedKey] = {}
        for key, reply in zip(keys, results, strict=False):
            state = _parsed(reply)
            if state is not None:
                found[key] = state
        return found

    async def _run(self, calls: list[tuple[str, list[str | int]]]) -> list[Any]:
        """The script on every key, in one pipeline; loaded once more if Redis lost it."""
        for attempt in range(2):
            pipe = self._redis.pipeline(transaction=False)
            for key, args in calls:
                pipe.evalsha(self._sha, 1, key, *args)
            try:
                results: list[Any] = await pipe.execute(raise_on_error=False)
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in results):
                    await self._redis.script_load(_MERGE)
                    continue
            except self._failures as exc:
                self._failed(exc)
                return []
            errors = [r for r in results if isinstance(r, Exception)]
            if errors:
                self._failed(errors[0])
            else:
                self._recovered()
            return results
        return []


def _samples(per_contributor: Mapping[str, tuple[float, int]]) -> list[str | int]:
    args: list[str | int] = []
    for contributor, (mean, count) in per_contributor.items():
        args += [contributor, repr(float(mean)), int(count)]
    return args


def _parsed(reply: Any) -> SharedKey | None:
    """The script's reply `[agreed, contributor, "ratio average samples updated", ...]`; None for an
    error or anything odd (a bad contributor entry is left out)."""
    if not isinstance(reply, list) or not reply or len(reply) % 2 != 1:
        return None
    try:
        agreed = float(_text(reply[0]))
    except ValueError:
        return None
    contributors: dict[str, tuple[float, float, int, float]] = {}
    for i in range(1, len(reply), 2):
        try:
            ratio, average, samples, updated = _text(reply[i + 1]).split()
            entry = (float(ratio), float(average), int(samples), float(updated))
            contributors[_text(reply[i])] = entry
        except ValueError:
            continue
    return agreed, contributors


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
