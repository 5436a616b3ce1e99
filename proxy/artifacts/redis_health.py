"""`StoreHealth`: how `RedisStore` reports an outage, once per incident, and counts failures."""

from __future__ import annotations

import asyncio
import logging
from typing import Any


class StoreHealth:
    """One line when the store becomes unavailable (its password masked), one when it is
    available again; `failed_operations` counts every failed operation (for /metrics)."""

    def __init__(self, where: str, password: str | None, logger: logging.Logger) -> None:
        self._where = where
        self._password = password
        self._log = logger
        self._healthy = True
        self.failed_operations = 0

    def failed(self, exc: BaseException) -> None:
        """A Redis call failed: re-raise a cancellation it swallowed, else note the outage.

        On Python 3.11 a cancellation that races the socket timeout can leave redis-py as a
        TimeoutError with the cancel request consumed (the task still reports `cancelling()`).
        Treating it as a store failure would let an abandoned request go on, e.g. call the
        upstream for a client that has disconnected, so the cancellation is restored instead.
        """
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError() from exc
        self.failed_operations += 1
        self._went_unhealthy(exc)

    def note_errors(self, results: list[Any]) -> None:
        """The answers of one round trip: a failure if any is an error, else a success."""
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            self.failed_operations += 1
            self._went_unhealthy(errors[0])
        else:
            self.recovered()

    def _went_unhealthy(self, exc: BaseException) -> None:
        if not self._healthy:
            return
        self._healthy = False
        message = str(exc)
        if self._password:
            message = message.replace(self._password, "***")
        self._log.warning(
            "artifact store at %s unavailable: %s: %s", self._where, type(exc).__name__, message
        )

    def recovered(self) -> None:
        if self._healthy:
            return
        self._healthy = True
        self._log.warning("artifact store at %s available again", self._where)
