"""`store` in config.yaml: where artifacts, the working set, summaries and records live (one
process's memory, one Redis server, or a Redis Cluster), and what each tenant may write there."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
CLUSTER_SCHEMES = ("redis://", "rediss://")
MIB = 1024 * 1024


class WriteBudgetSettings(BaseModel):
    """What one tenant may write to the artifact store (`null`: no limit of that kind). In
    passthrough mode every credential is a tenant scope of its own, with this budget each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bytes_per_minute: Annotated[int, Field(gt=0)] | None = Field(
        default=64 * MIB,
        description="Bytes of new artifacts a tenant may write per minute (a burst of one "
        "minute's worth, then this rate); a write over it is not made (the content stays in "
        "the prompt).",
    )
    max_live_bytes: Annotated[int, Field(gt=0)] | None = Field(
        default=512 * MIB,
        description="Bytes of artifacts a tenant may hold at once (until they expire or are "
        "evicted); a write over it is not made.",
    )

    def overridden_by(self, other: WriteBudgetSettings | None) -> WriteBudgetSettings:
        """These settings with the keys `other` sets itself (a tenant's own budget)."""
        if other is None:
            return self
        return self.model_copy(update={k: getattr(other, k) for k in other.model_fields_set})


class StoreSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["memory", "redis", "redis-cluster"] = Field(
        default="memory",
        description="memory: one process; redis: one Redis server shared by the replicas; "
        "redis-cluster: a Redis Cluster shared by the replicas (`url` names any one node).",
    )
    url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="redis: the server (redis://, rediss:// or unix://); redis-cluster: one "
        "node to discover the cluster from (redis:// or rediss://, database 0).",
    )
    cluster_nodes: list[str] = Field(
        default_factory=list,
        description="redis-cluster only: more nodes (`host:port` each) to discover the cluster "
        "from when the node of `url` does not answer at start; credentials and TLS as in `url`.",
    )
    key_prefix: str = "ctxproxy:"
    secret: str = Field(
        default="", description="HMAC secret for artifact ids; random per process if empty."
    )
    pool_size: Annotated[int, Field(gt=0)] = 64
    pool_timeout_s: Annotated[float, Field(gt=0)] = 2.0
    socket_timeout_s: Annotated[float, Field(gt=0)] = 2.0
    memory_max_bytes: Annotated[int, Field(gt=0)] = Field(
        default=256 * 1024 * 1024,
        description="Memory store only: bytes of artifacts held across all scopes; the least "
        "recently used go first, never one a request in flight references.",
    )
    calibration_sync_s: Annotated[float, Field(gt=0)] = Field(
        default=5.0,
        description="Redis store only: how often replicas merge their count ratios in the store.",
    )
    write_budget: WriteBudgetSettings = Field(
        default_factory=WriteBudgetSettings,
        description="What each tenant (its sessions, working set and summaries included) may "
        "write; `tenants[].write_budget` overrides it per tenant.",
    )

    @field_validator("url")
    @classmethod
    def _redis_url(cls, url: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        schemes = {"redis": REDIS_SCHEMES, "redis-cluster": CLUSTER_SCHEMES}.get(str(kind))
        if schemes is not None and not url.lower().startswith(schemes):
            scheme = url.split("://", 1)[0] + "://" if "://" in url else "no scheme"
            # never the whole URL: it may carry a password
            raise ValueError(f"must start with {', '.join(schemes)} (not {scheme})")
        if kind == "redis-cluster" and urlsplit(url).path.strip("/") not in ("", "0"):
            raise ValueError("a Redis Cluster has only database 0: end the URL with /0 or no path")
        return url

    @field_validator("cluster_nodes")
    @classmethod
    def _host_and_port(cls, nodes: list[str]) -> list[str]:
        for node in nodes:
            host, _, port = node.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{node!r} is not host:port")
        return nodes

    @property
    def shared(self) -> bool:
        """Whether replicas share this store (Redis or Redis Cluster)."""
        return self.kind != "memory"
