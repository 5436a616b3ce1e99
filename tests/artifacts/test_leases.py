"""`Leases`: the reference counts of what the requests in flight pin."""

from __future__ import annotations

from proxy.artifacts.leases import Leases


def test_a_key_pinned_by_several_leases_stays_pinned_until_the_last_one_ends() -> None:
    released: list[int] = []
    leases = Leases(on_release=lambda: released.append(leases.count))
    first, second, third = leases.lease(), leases.lease(), leases.lease()
    with first:
        leases.pin("t1", ["a", "b"])
        with second:
            leases.pin("t1", ["a"])
            with third:
                leases.pin("t1", ["a", "a"])  # twice in one lease: one pin
            assert leases.pinned("t1", "a") and released == [2]
        assert leases.pinned("t1", "a") and released == [2, 2]
    assert not leases.pinned("t1", "a") and not leases.pinned("t1", "b")
    assert released == [2, 2, 0] and leases.count == 0


def test_pins_are_per_scope_and_none_outside_a_lease() -> None:
    leases = Leases()
    leases.pin("t1", ["a"])
    assert leases.count == 0
    with leases.lease():
        leases.pin("t1", ["a"])
        assert leases.pinned("t1", "a") and not leases.pinned("t2", "a")


def test_ending_a_lease_that_was_never_entered_or_already_ended_does_nothing() -> None:
    leases = Leases()
    lease = leases.lease()
    lease.__exit__(None, None, None)
    with lease:
        leases.pin("t1", ["a"])
    lease.__exit__(None, None, None)
    assert leases.count == 0
