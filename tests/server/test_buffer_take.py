"""BufferTable.take / give_back, the plain borrow pair of the one-frame Run: a region
released while taken stays mapped until it is given back, then is unmapped and its bytes
given back to the budget; an unknown id is refused with NNRT_INVALID_BUFFER and nothing
stays borrowed. RunStats.begin / end count like started / finished."""

from __future__ import annotations

import pytest

from nnrt.common.errors import NNRT_INVALID_BUFFER, DriverError
from nnrt.server.buffers import BufferTable, SharedMemoryBudget, SharedRegion
from nnrt.server.stats import RunStats


def _table() -> tuple[BufferTable, SharedMemoryBudget]:
    budget = SharedMemoryBudget(1 << 20, 1 << 20)
    return BufferTable(budget), budget


def test_a_region_released_while_taken_is_unmapped_when_given_back():
    table, budget = _table()
    region = SharedRegion.allocate(64)
    buffer_id = table.add(region)
    regions = table.take([buffer_id])
    assert regions == [region]
    table.remove(buffer_id)  # released while taken: still mapped
    assert not region._map.closed and budget.used == 64
    with pytest.raises(DriverError) as refused:  # but no longer in the table
        table.take([buffer_id])
    assert refused.value.code == NNRT_INVALID_BUFFER
    table.give_back(regions)
    assert region._map.closed and budget.used == 0


def test_an_unknown_id_leaves_nothing_borrowed():
    table, budget = _table()
    region = SharedRegion.allocate(64)
    buffer_id = table.add(region)
    with pytest.raises(DriverError) as refused:
        table.take([buffer_id, buffer_id + 1])
    assert refused.value.code == NNRT_INVALID_BUFFER
    assert f"unknown buffer id {buffer_id + 1}" in refused.value.message
    table.remove(buffer_id)  # nobody borrows it: unmapped at once
    assert region._map.closed and budget.used == 0


def test_begin_and_end_count_as_started_and_finished():
    paired, kept = RunStats(), RunStats()
    for succeeded, abandoned, code in ((True, False, 0), (False, False, 7), (False, True, 9)):
        paired.started()
        paired.finished(succeeded=succeeded, abandoned=abandoned, code=code, model="m")
        kept.end(kept.begin(), succeeded, abandoned, code, "m")
    a, b = paired.snapshot(), kept.snapshot()
    assert (a.completed, a.failed, a.abandoned, a.in_flight) == (1, 1, 1, 0)
    assert (b.completed, b.failed, b.abandoned, b.in_flight) == (1, 1, 1, 0)
    assert a.failed_by_code == b.failed_by_code and a.by_model == b.by_model
    assert sum(a.latency_counts) == sum(b.latency_counts) == 1
