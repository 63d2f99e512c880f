"""machinery/retry.py: client-go's retry.OnError / RetryOnConflict, and the read-modify-write on top."""

from __future__ import annotations

import pytest

from machinery import errors, retry
from machinery.retry import Backoff

NO_WAIT = Backoff(steps=5, duration=0.0)


def test_the_backoffs_are_client_gos():
    assert retry.DEFAULT_RETRY == Backoff(steps=5, duration=0.010, factor=1.0, jitter=0.1)
    assert retry.DEFAULT_BACKOFF == Backoff(steps=4, duration=0.010, factor=5.0, jitter=0.1)
    assert list(Backoff(steps=4, duration=0.01, factor=5.0).waits()) == pytest.approx([0.01, 0.05, 0.25])
    jittered = list(Backoff(steps=50, duration=1.0, jitter=0.1).waits())
    assert len(jittered) == 49 and all(1.0 <= w <= 1.1 for w in jittered) and len(set(jittered)) > 1


async def test_a_conflict_is_tried_again_until_the_write_lands():
    calls = []

    async def write():
        calls.append(1)
        if len(calls) < 3:
            raise errors.Conflict("the object has been modified")
        return "written"

    assert await retry.retry_on_conflict(write, NO_WAIT) == "written"
    assert len(calls) == 3


async def test_the_last_conflict_is_raised_after_every_step_failed():
    calls = []

    async def write():
        calls.append(1)
        raise errors.Conflict(f"conflict {len(calls)}")

    with pytest.raises(errors.Conflict, match="conflict 5"):
        await retry.retry_on_conflict(write, NO_WAIT)
    assert len(calls) == 5


async def test_any_other_error_is_raised_at_once():
    calls = []

    async def write():
        calls.append(1)
        raise errors.NotFound("gone")

    with pytest.raises(errors.NotFound):
        await retry.retry_on_conflict(write, NO_WAIT)
    assert len(calls) == 1


async def test_on_error_retries_what_it_is_told_to():
    seen = []

    async def flaky():
        seen.append(1)
        if len(seen) == 1:
            raise errors.ApiError("unavailable")
        if len(seen) == 2:
            raise ValueError("not retriable")
        return "ok"

    with pytest.raises(ValueError):
        await retry.on_error(NO_WAIT, lambda e: isinstance(e, errors.ApiError), flaky)
    assert len(seen) == 2


async def test_retry_update_writes_the_copy_at_hand_first_then_fresh_reads():
    reads, written_on = [], []

    async def latest():
        reads.append(1)
        return f"fresh-{len(reads)}"

    async def write(obj):
        written_on.append(obj)
        if obj != "fresh-2":
            raise errors.Conflict("stale")
        return f"wrote {obj}"

    assert await retry.retry_update("cached", latest, write, NO_WAIT) == "wrote fresh-2"
    assert written_on == ["cached", "fresh-1", "fresh-2"]
    assert len(reads) == 2
