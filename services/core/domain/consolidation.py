"""Consolidation's vocabulary: modes, tasks, run records, schedules. Pure, no I/O.

A run is one task (decay, creative, cluster, forget) over one tenant; a mode
names what a caller asks for: one task, or `full` (every task, in TASK_ORDER).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

import numpy as np

from services.core.domain.errors import InvalidArgument


class Task(StrEnum):
    """One consolidation pass; the value is its name in settings, history and leases."""

    DECAY = "decay"
    CREATIVE = "creative"
    CLUSTER = "cluster"
    FORGET = "forget"


#: The order `full` runs the tasks in: forgetting reads the scores decay just wrote.
TASK_ORDER = (Task.DECAY, Task.CREATIVE, Task.CLUSTER, Task.FORGET)
#: What POST /consolidate accepts as `mode`.
MODES = ("full", *(task.value for task in TASK_ORDER))


def tasks_for_mode(mode: str) -> tuple[Task, ...]:
    """The tasks a mode runs, in order; INVALID_MODE (field `mode`) for anything else."""
    value = (mode or "").strip().lower()
    if value == "full":
        return TASK_ORDER
    if value in MODES:
        return (Task(value),)
    raise InvalidArgument("INVALID_MODE", f"'mode' must be one of {', '.join(MODES)}: {mode!r}", field="mode")


def page_pause(page_seconds: float, *, floor_seconds: float, ratio: float) -> float:
    """The pause after a pass's page: `ratio` times what the page took (its
    reads, writes and relay), never less than `floor_seconds`. A duty cycle:
    the pass holds at most 1 / (1 + ratio) of the time whatever a page costs
    on this store, so a page that got slower (a loaded store, bigger writes)
    waits longer and recall's queries get the store in between."""
    return max(0.0, floor_seconds, ratio * max(0.0, page_seconds))


@dataclass(frozen=True, slots=True)
class MemorySample:
    """What association and clustering read of a memory: its vector and enough to describe it.

    The store gives the vector packed (float32, `array("f")`): a clustering
    run holds thousands, and as lists of floats they were most of the pass's
    high-water mark, which the process kept after it."""

    id: str
    content: str
    type: str
    importance: float
    embedding: Sequence[float]
    #: Why the store could not read this record ('' when it could): the pass skips and counts it.
    unreadable: str = ""


def unit_rows(samples: list[MemorySample]) -> tuple[list[MemorySample], np.ndarray]:
    """The samples of the most common vector dimension (a tenant mid-way
    through a model change holds two) with a non-zero vector, and their
    vectors as unit rows (association and clustering compare by cosine)."""
    if not samples:
        return [], np.zeros((0, 0), dtype=np.float32)
    dim = Counter(len(s.embedding) for s in samples).most_common(1)[0][0]
    kept = [s for s in samples if len(s.embedding) == dim and dim > 0]
    matrix = np.asarray([s.embedding for s in kept], dtype=np.float32).reshape(len(kept), dim)
    norms = np.linalg.norm(matrix, axis=1)
    ok = norms > 0
    return [s for s, good in zip(kept, ok, strict=True) if good], matrix[ok] / norms[ok, None]


@dataclass(slots=True)
class RunRecord:
    """One task's run over one tenant, as the history keeps it.

    `counts` are what the task did (or, in a dry run, would have done), e.g.
    {"scanned": 1000, "updated": 40, "events": 12}; `errors` the messages of
    what failed (a failed run still records its counts so far)."""

    id: str
    tenant: str
    task: str
    mode: str
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None = None
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: "scheduled" (the scheduler) or "manual" (POST /consolidate).
    trigger: str = "manual"

    @property
    def ok(self) -> bool:
        """Finished without errors."""
        return self.finished_at is not None and not self.errors


@dataclass(frozen=True, slots=True)
class Schedule:
    """How often each task runs on its own (seconds; 0 = never scheduled)."""

    intervals: dict[str, int]

    def interval(self, task: Task | str) -> int:
        """The task's interval in seconds (0: not scheduled)."""
        return max(0, int(self.intervals.get(str(task), 0)))

    def next_run(self, task: Task | str, last_started: datetime | None, now: datetime) -> datetime | None:
        """When the task is due: last start + interval (in the past when
        overdue), or now when it never ran; None when it is not scheduled."""
        seconds = self.interval(task)
        if not seconds:
            return None
        if last_started is None:
            return now
        return last_started + timedelta(seconds=seconds)

    def due(self, task: Task | str, last_started: datetime | None, now: datetime) -> bool:
        """Whether the scheduler should start the task now."""
        when = self.next_run(task, last_started, now)
        return when is not None and when <= now


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a running task has got: for status and the logs."""

    task: str
    done: int = 0
    #: The expected total when known (e.g. the tenant's memory count), else 0.
    total: int = 0
    phase: str = ""

    @property
    def fraction(self) -> float | None:
        """done / total in [0, 1], or None when the total is unknown."""
        if self.total <= 0:
            return None
        return min(1.0, self.done / self.total)
