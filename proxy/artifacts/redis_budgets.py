"""The write budgets on Redis (`artifacts.budgets`): the keys of a scope and of its owner, and
the two Lua scripts that keep an owner's accounting in the same round trips as the writes.

Keys (every key of an owner carries the owner's hash tag, so a Redis Cluster keeps an owner, with
its sessions and sub-scopes, on one slot and a script may touch all of them):

    {prefix}{<owner tag>}:a:<id>           an artifact of the owner's own scope
    {prefix}{<owner tag>}:idx              that scope's index (for the count cap)
    {prefix}{<owner tag>}:<scope tag>:a:<id>, ...:<scope tag>:idx   the same for another scope
                                           of the owner (a session, the working set, summaries)
    {prefix}{<owner tag>}:live             hash: artifact key (after the tag) -> bytes counted,
                                           and `.total`
    {prefix}{<owner tag>}:exp              sorted set: artifact key (after the tag) -> when it
                                           expires at the earliest
    {prefix}{<owner tag>}:rate             hash: the rate bucket (`tokens`, `at`)

`WRITE` replaces the second round trip of a `put_many`: it drops the accounting of the owner's
artifacts that have expired (an entry whose time has come is checked against its key's real TTL,
so an artifact refreshed since is re-dated, not forgotten), refills the rate bucket, writes each
new payload that the budgets allow (one written by another replica meanwhile is refreshed and
confirmed), removes the refused ones from the index, evicts as many of the scope's oldest as the
count cap still asks, and keeps the accounting keys alive for at least the TTL. To check an
expiry it reads an artifact's PTTL by its name in `exp`: a key it was not given, but one under the
same hash tag, so on the same Cluster slot. It reads before it writes anything: a Redis over
`maxmemory` refuses a script's writes that need memory only until the script has written, so the
first write is a payload's, refused as a plain SET would be. `TOUCH` rides in the first round trip
(the refresh) and only extends the accounting keys' TTL: a refresh makes artifacts live longer,
their accounting must too. A Redis that lost the scripts (restarted) has them loaded again, at
the cost of one more round trip then.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from proxy.artifacts.budgets import WriteBudget
from proxy.artifacts.redis_clients import RedisClient

WRITE = """
local live_key, exp_key, rate_key, index = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local per_minute, live_max = tonumber(ARGV[3]), tonumber(ARGV[4])
local n, m, overflow = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local base = string.sub(live_key, 1, -5)
local counting = live_max >= 0
-- 1. Reads only. A Redis over maxmemory refuses a script's writes that need memory only until
-- the script has written something: its first write must be a payload's.
local total, gone, redated = 0, {}, {}
local function forget(name)
  if counting and not gone[name] then
    local size = tonumber(redis.call('HGET', live_key, name))
    if size then total = total - size; gone[name] = true end
  end
end
if counting then
  total = tonumber(redis.call('HGET', live_key, '.total')) or 0
  local due = redis.call('ZRANGEBYSCORE', exp_key, '-inf', ARGV[1], 'LIMIT', 0, 256)
  for _, name in ipairs(due) do
    local left = redis.call('PTTL', base .. name)
    if left == -2 then forget(name); gone[name] = true
    elseif left > 0 then redated[name] = now + left / 1000
    else redated[name] = now + ttl end
  end
end
local tokens = per_minute
if per_minute >= 0 then
  local state = redis.call('HMGET', rate_key, 'tokens', 'at')
  local held, at = tonumber(state[1]), tonumber(state[2])
  if held and at then
    tokens = math.min(per_minute, held + math.max(0, now - at) * per_minute / 60)
  end
end
local statuses, writes = {}, {}
for i = 1, n do
  local key, size = KEYS[4 + i], tonumber(ARGV[7 + n + i])
  if redis.call('EXISTS', key) == 1 then statuses[i] = 'exists'
  else
    forget(string.sub(key, #base + 1))
    if counting and total + size > live_max then statuses[i] = 'live_bytes'
    elseif per_minute >= 0 and size > tokens then statuses[i] = 'bytes_per_minute'
    else
      statuses[i] = 'ok'
      writes[#writes + 1] = i
      if per_minute >= 0 then tokens = tokens - size end
      if counting then total = total + size end
    end
  end
end
-- 2. The payloads.
for _, i in ipairs(writes) do
  local reply = redis.pcall('SET', KEYS[4 + i], ARGV[7 + i], 'EX', ttl)
  if type(reply) == 'table' and reply.err then
    statuses[i] = reply.err
    local size = tonumber(ARGV[7 + n + i])
    if per_minute >= 0 then tokens = tokens + size end
    if counting then total = total - size end
  end
end
-- 3. Everything else (the first of these needs no memory).
redis.call('EXPIRE', index, ttl)
local refused = 0
for i = 1, n do
  local key = KEYS[4 + i]
  if statuses[i] == 'exists' then
    redis.call('EXPIRE', key, ttl)
    statuses[i] = 'ok'
  elseif statuses[i] ~= 'ok' then
    redis.call('ZREM', index, string.sub(key, -36))
    refused = refused + 1
  end
end
for j = 1, math.min(m, overflow - refused) do
  local key = KEYS[4 + n + j]
  redis.call('DEL', key)
  redis.call('ZREM', index, string.sub(key, -36))
  forget(string.sub(key, #base + 1))
end
if counting then
  for name in pairs(gone) do
    redis.call('HDEL', live_key, name)
    redis.call('ZREM', exp_key, name)
  end
  for name, at in pairs(redated) do redis.call('ZADD', exp_key, at, name) end
  for _, i in ipairs(writes) do
    if statuses[i] == 'ok' then
      local name = string.sub(KEYS[4 + i], #base + 1)
      redis.call('HSET', live_key, name, ARGV[7 + n + i])
      redis.call('ZADD', exp_key, now + ttl, name)
    end
  end
  if redis.call('ZCARD', exp_key) == 0 then
    redis.call('DEL', live_key)
  else
    redis.call('HSET', live_key, '.total', total)
    for _, key in ipairs({live_key, exp_key}) do
      local left = redis.call('TTL', key)
      if left == -1 or left < ttl then redis.call('EXPIRE', key, ttl) end
    end
  end
end
if per_minute >= 0 then
  redis.call('HSET', rate_key, 'tokens', string.format('%.17g', tokens),
    'at', string.format('%.17g', now))
  redis.call('EXPIRE', rate_key, 120)
end
return statuses
"""

TOUCH = """
local ttl = tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
  local left = redis.call('TTL', key)
  if left == -1 or (left >= 0 and left < ttl) then redis.call('EXPIRE', key, ttl) end
end
return 0
"""

WRITE_SHA = hashlib.sha1(WRITE.encode()).hexdigest()
TOUCH_SHA = hashlib.sha1(TOUCH.encode()).hexdigest()
_NONE = -1
"""A budget without a limit, to the scripts."""


@dataclass(frozen=True)
class ScopeKeys:
    """The keys of one scope: under its owner's hash tag (`owner`), in its own part (`within`)."""

    owner: str
    """`{prefix}{<owner tag>}:`"""
    within: str
    """What the scope's payloads and index start with: `owner`, or `owner<scope tag>:`."""

    def payload(self, artifact_id: str) -> str:
        return f"{self.within}a:{artifact_id}"

    @property
    def index(self) -> str:
        return f"{self.within}idx"

    @property
    def accounting(self) -> tuple[str, str, str]:
        """The owner's `live`, `exp` and `rate` keys."""
        return f"{self.owner}live", f"{self.owner}exp", f"{self.owner}rate"


def limit_arg(value: int | None) -> int:
    return _NONE if value is None else value


async def touch(redis: RedisClient, keys: ScopeKeys, ttl: int) -> Any:
    """`TOUCH` once more, after Redis answered NOSCRIPT to it in the refresh (a restart)."""
    await redis.script_load(TOUCH)
    live, expiry, _ = keys.accounting
    return await redis.evalsha(TOUCH_SHA, 2, live, expiry, ttl)


async def write(
    redis: RedisClient,
    keys: ScopeKeys,
    values: Mapping[str, bytes],
    sizes: Mapping[str, int],
    evicted: Sequence[str],
    overflow: int,
    *,
    ttl: int,
    budget: WriteBudget,
    now: float,
) -> Any:
    """One `WRITE` (one round trip; two when Redis lost the script): the reply, a status per
    item of `values` in order (`ok`, `live_bytes`, `bytes_per_minute` or an error's text), or
    the error Redis answered. Transport failures raise."""
    ids = list(values)
    names = [*keys.accounting, keys.index]
    names += [keys.payload(aid) for aid in ids] + [keys.payload(aid) for aid in evicted]
    args: list[bytes | str | int] = [repr(float(now)), ttl, limit_arg(budget.bytes_per_minute)]
    args += [limit_arg(budget.live_bytes), len(ids), len(evicted), overflow]
    args += [*(values[aid] for aid in ids), *(sizes[aid] for aid in ids)]
    reply: Any = None
    for attempt in range(2):
        pipe = redis.pipeline(transaction=False)
        pipe.evalsha(WRITE_SHA, len(names), *names, *args)
        [reply] = await pipe.execute(raise_on_error=False)
        if attempt == 0 and isinstance(reply, NoScriptError):
            await redis.script_load(WRITE)
            continue
        break
    return reply


def statuses(reply: Any, ids: Sequence[str]) -> dict[str, str] | None:
    """`WRITE`'s reply as `id -> status`; None when it is not one status per item."""
    if not isinstance(reply, list) or len(reply) != len(ids):
        return None
    return {
        aid: s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)
        for aid, s in zip(ids, reply, strict=True)
    }
