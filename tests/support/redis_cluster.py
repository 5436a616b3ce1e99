"""A private Redis Cluster for tests: 3 masters + 3 replicas, each its own `redis-server`.

The nodes run in cluster mode on free loopback ports (`RedisProcess` with cluster arguments, no
persistence), `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes` joins them,
and `start()` returns once every node reports `cluster_state:ok` and every master has its
replica attached (so that killing a master fails over). A cluster made for a failover has a
short node timeout (its replica takes over within seconds instead of the default fifteen); the
others a longer one, so that a starved test machine never fails a node over by itself.

`require_cluster_binaries()` FAILS (never skips) when `redis-server` or `redis-cli` is missing:
the Cluster tests are part of CI and must not quietly disappear.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import time
from collections.abc import Callable

import pytest
import redis
from redis_process import RedisProcess, free_port

STEADY_NODE_TIMEOUT_MS = 5000
"""A cluster that no test breaks: long enough that a starved machine never fails a node over."""
FAILOVER_NODE_TIMEOUT_MS = 1000
"""A cluster whose master a test kills: its replica takes over within a few seconds."""
WAIT_S = 60.0
"""Only bounds a hang: the cluster forms, and fails over, within seconds."""


def require_cluster_binaries() -> tuple[str, str]:
    """`redis-server` and `redis-cli`, or the test FAILS saying which one is missing."""
    server = os.environ.get("CTXPROXY_TEST_REDIS_SERVER") or shutil.which("redis-server")
    cli = os.environ.get("CTXPROXY_TEST_REDIS_CLI") or shutil.which("redis-cli")
    missing = [name for name, path in (("redis-server", server), ("redis-cli", cli)) if not path]
    if missing or server is None or cli is None:
        pytest.fail(
            f"{' and '.join(missing)} not installed: the Redis Cluster tests start their own "
            "cluster and must run (apt-get install redis-server; it brings redis-tools)",
            pytrace=False,
        )
    return server, cli


def _cluster_args(node: RedisProcess, node_timeout_ms: int) -> tuple[str, ...]:
    return (
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        str(node.directory / "nodes.conf"),
        "--cluster-port",
        str(free_port()),  # the bus port; by default port + 10000, which may be taken
        "--cluster-node-timeout",
        str(node_timeout_ms),
        "--cluster-replica-validity-factor",
        "0",  # a replica may always take over, however long its master was gone
        "--maxmemory-policy",
        "noeviction",
    )


class LocalCluster:
    """`masters` masters with one replica each, on free loopback ports."""

    def __init__(
        self,
        server: str,
        cli: str,
        masters: int = 3,
        node_timeout_ms: int = STEADY_NODE_TIMEOUT_MS,
    ) -> None:
        self.cli = cli
        self.nodes = [RedisProcess(server) for _ in range(masters * 2)]
        for node in self.nodes:
            node.extra_args = _cluster_args(node, node_timeout_ms)
        atexit.register(self.cleanup)

    @property
    def url(self) -> str:
        """A seed node's URL (the client discovers the others)."""
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        create = [self.cli, "--cluster", "create", *addresses, "--cluster-replicas", "1"]
        done = subprocess.run(
            [*create, "--cluster-yes"], capture_output=True, timeout=WAIT_S, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-2000:]!r}")
        self.wait_until(self._formed, "the cluster to form")

    def _formed(self) -> bool:
        masters = [n for n in self.nodes if n.running and self.role(n) == "master"]
        return (
            all(self.state(n) == "ok" for n in self.nodes if n.running)
            and len(masters) == len(self.nodes) // 2
            and all(self.connected_replicas(n) == 1 for n in masters)
        )

    # -- questions to one node ------------------------------------------------------------

    def _ask(self, node: RedisProcess, *command: str) -> object:
        client = redis.Redis(port=node.port, socket_timeout=5, socket_connect_timeout=5)
        try:
            return client.execute_command(*command)
        except redis.RedisError:
            return None
        finally:
            client.close()

    def _info(self, node: RedisProcess, section: str) -> dict[str, object]:
        answer = self._ask(node, "INFO", section)
        return answer if isinstance(answer, dict) else {}

    def state(self, node: RedisProcess) -> str:
        answer = self._ask(node, "CLUSTER", "INFO")
        text = answer.decode() if isinstance(answer, bytes) else str(answer)
        for line in text.splitlines():
            if line.startswith("cluster_state:"):
                return line.split(":", 1)[1].strip()
        return "unknown"

    def role(self, node: RedisProcess) -> str:
        return str(self._info(node, "replication").get("role", "unknown"))

    def connected_replicas(self, node: RedisProcess) -> int:
        return int(str(self._info(node, "replication").get("connected_slaves", 0)))

    def master_of_slot(self, slot: int) -> RedisProcess:
        """The node that serves `slot` now, as a running node sees it."""
        seen = next(n for n in self.nodes if n.running and self.state(n) == "ok")
        answer = self._ask(seen, "CLUSTER", "SLOTS")
        for entry in answer if isinstance(answer, list) else []:
            low, high, (_, port, *_) = int(entry[0]), int(entry[1]), entry[2]
            if low <= slot <= high:
                return next(n for n in self.nodes if n.port == int(port))
        raise LookupError(f"no node serves slot {slot}")

    def slot_of(self, key: str) -> int:
        answer = self._ask(self.nodes[0], "CLUSTER", "KEYSLOT", key)
        return int(str(answer))

    def masters(self) -> list[RedisProcess]:
        return [n for n in self.nodes if n.running and self.role(n) == "master"]

    # -- moving a slot (as `redis-cli --cluster reshard` does, one step at a time) -----------

    def _run(self, node: RedisProcess, *command: str | int) -> object:
        """A command that must succeed (raises what Redis answers)."""
        client = redis.Redis(port=node.port, socket_timeout=30, socket_connect_timeout=5)
        try:
            return client.execute_command(*command)
        finally:
            client.close()

    def node_id(self, node: RedisProcess) -> str:
        answer = self._run(node, "CLUSTER", "MYID")
        return answer.decode() if isinstance(answer, bytes) else str(answer)

    def begin_moving(self, slot: int, source: RedisProcess, target: RedisProcess) -> None:
        """`slot` migrating from `source` to `target`: from now on a key already moved is
        answered with ASK by `source`, and a command on keys on both sides with TRYAGAIN."""
        self._run(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", self.node_id(source))
        self._run(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", self.node_id(target))

    def move_keys(self, slot: int, source: RedisProcess, target: RedisProcess, count: int) -> int:
        """Moves up to `count` keys of `slot` from `source` to `target`; how many it moved."""
        keys = self._run(source, "CLUSTER", "GETKEYSINSLOT", slot, count)
        if not isinstance(keys, list) or not keys:
            return 0
        self._run(source, "MIGRATE", "127.0.0.1", target.port, "", 0, 30000, "KEYS", *keys)
        return len(keys)

    def end_moving(self, slot: int, target: RedisProcess) -> None:
        """`slot` belongs to `target` now (told to the target first, then every other master):
        a client that still sends it to the old owner gets MOVED."""
        others = [n for n in self.masters() if n is not target]
        for node in [target, *others]:
            self._run(node, "CLUSTER", "SETSLOT", slot, "NODE", self.node_id(target))

    # -- waiting ----------------------------------------------------------------------------

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.05)
        tails = "\n".join(f"{n.port}: {n.log_tail(5)}" for n in self.nodes)
        raise RuntimeError(f"timed out waiting for {what}:\n{tails}")

    def wait_replicated(self) -> None:
        """Until every master's replica has acknowledged all it was sent (asynchronous
        replication: what a master confirmed survives its death only once this holds)."""

        def caught_up() -> bool:
            for node in self.nodes:
                if not node.running or self.role(node) != "master":
                    continue
                info = self._info(node, "replication")
                offset = int(str(info.get("master_repl_offset", -1)))
                replica = info.get("slave0")
                if not isinstance(replica, dict) or int(replica.get("offset", -1)) != offset:
                    return False
            return True

        self.wait_until(caught_up, "replicas to catch up")

    def wait_failed_over(self, killed: RedisProcess, slot: int) -> RedisProcess:
        """After `killed` died: until the survivors agree the cluster is ok again, with another
        node serving `slot`; returns that node."""

        def taken_over() -> bool:
            survivors = [n for n in self.nodes if n.running]
            if not all(self.state(n) == "ok" for n in survivors):
                return False
            return self.master_of_slot(slot) is not killed

        self.wait_until(taken_over, f"a replica to take over from port {killed.port}")
        return self.master_of_slot(slot)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()
        atexit.unregister(self.cleanup)
