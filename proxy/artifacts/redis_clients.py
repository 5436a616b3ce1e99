"""The Redis clients `RedisStore` talks through: one server (`standalone_client`) or a Redis
Cluster (`cluster_client`), and the few questions whose answer differs between the two.

Every command the store sends works on either client: a pipeline of one scope's keys (one hash
tag, one slot) and a script's keys stay on one Cluster node, and a pipeline of several scopes'
keys (the count ratios) is split per node by the cluster client. The cluster client follows
MOVED and ASK redirections, and after a node stops answering it refreshes its slot map and
retries (a bounded number of times), so a replica that took over a dead master is found without
the store knowing.

Differences that remain: a cluster client's pool is per node and fails at once when full (it
does not wait `pool_timeout`); PING and INFO go to every master (`ping`, `memory_infos`);
a cluster has only database 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff

RedisClient = Redis | RedisCluster
"""What `RedisStore` sends its commands through."""

CLUSTER_RETRIES = 3
"""How often a cluster command is retried after a node failure, a timeout or CLUSTERDOWN,
refreshing the slot map in between. The back-off below adds about a second in all: enough to
ride out a slot that moved or a replica that is just being promoted, short enough that a request
on a dead master gets the store's fallback soon (a stalled one costs up to four socket
timeouts)."""


def standalone_client(
    url: str, *, pool_size: int, pool_timeout: float, socket_timeout: float, connect_timeout: float
) -> Redis:
    """One server, through a blocking pool (a request waits up to `pool_timeout` for one of
    `pool_size` connections instead of failing at once)."""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=pool_size,
        timeout=pool_timeout,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        retry=Retry(NoBackoff(), 1),  # one immediate retry replaces a stale connection
    )
    return Redis.from_pool(pool)


def cluster_client(
    url: str,
    *,
    pool_size: int,
    socket_timeout: float,
    connect_timeout: float,
    more_nodes: Sequence[str] = (),
) -> RedisCluster:
    """A Redis Cluster found from the node of `url` or any of `more_nodes` (`host:port` each,
    tried when that one does not answer), `pool_size` connections per node."""
    return RedisCluster.from_url(
        url,
        startup_nodes=[ClusterNode(*node_address(node)) for node in more_nodes],
        max_connections=pool_size,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.1), CLUSTER_RETRIES),
    )


def node_address(node: str) -> tuple[str, int]:
    """`host:port` (`[v6 address]:port` too) as a host and a port."""
    host, _, port = node.rpartition(":")
    return host.strip("[]"), int(port)


def is_cluster(client: RedisClient) -> bool:
    return isinstance(client, RedisCluster)


async def ping(client: RedisClient) -> None:
    """PING the server, or every master of a cluster (all must answer: each holds a share of
    the scopes). Raises what the client raises."""
    if isinstance(client, RedisCluster):
        await client.ping(target_nodes=RedisCluster.PRIMARIES)
    else:
        await client.ping()


async def memory_infos(client: RedisClient) -> list[dict[str, Any]]:
    """`INFO memory` of the server, or of every master of a cluster."""
    if isinstance(client, RedisCluster):
        per_node = await client.info("memory", target_nodes=RedisCluster.PRIMARIES)
        return [info for info in per_node.values() if isinstance(info, dict)]
    info = await client.info("memory")
    return [info] if isinstance(info, dict) else []


def where(url: str, *, cluster: bool) -> str:
    """The store's address for logs and errors, without credentials."""
    parts = urlsplit(url)
    address = f"{parts.hostname or 'localhost'}:{parts.port or 6379}"
    return f"Redis Cluster via {address}" if cluster else address
