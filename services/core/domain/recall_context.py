"""Ranked recall's context components, pure: who a memory is spoken by (the
speaker component: the query names it), and how strong the memories
written around it are (the neighbourhood component).

A memory of a conversation is often the answer half of an exchange ("Yes,
it was amazing!") or one turn of a session whose other turns carry the
query's words. Scored alone it ranks low; its neighbours in time, in the
same recall's scope, say where the conversation was about the query. The
neighbourhood component of a candidate is the best first-pass score among
the candidates written within `seconds` of it (itself included), so a turn
inside a strongly matching stretch of memories is lifted towards it, and a
lone weak match is not. It reads only the candidates already scored: no
read, no extra query.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from services.core.domain.model import Memory
from services.core.domain.recall_text import all_words

#: A conversational memory's leading speaker label: "Caroline: ...", "Dr Jones: ..." (at most three
#: words), after a bracketed stamp when a transcript carries one ("[1:56 pm on 8 May, 2023] Caroline: ...").
_SPEAKER_LABEL = re.compile(r"\s*(?:[\[(][^\])\n]{1,60}[\])]\s*)?([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s")
#: metadata keys naming who said or wrote a memory, in the order they are read.
SPEAKER_KEYS = ("speaker", "author", "user_name")
#: Tag prefixes naming who said or wrote a memory ("speaker:caroline", "author:dr-ann-lee"), as a
#: client that files its speaker as a tag writes it; hyphens and underscores stand for spaces.
SPEAKER_TAG_PREFIXES = tuple(f"{key}:" for key in SPEAKER_KEYS)


def speaker_of(memory: Memory) -> str:
    """Who a memory is spoken by: metadata's speaker (or author, user_name)
    when it is a string, else a speaker (author, user_name) tag, else the
    content's leading "Name:" label; "" when none says."""
    metadata = memory.metadata if isinstance(memory.metadata, dict) else {}
    for key in SPEAKER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    for prefix in SPEAKER_TAG_PREFIXES:
        for tag in memory.tags:
            name = tag[len(prefix) :].replace("-", " ").replace("_", " ").strip() if tag.startswith(prefix) else ""
            if name:
                return name
    match = _SPEAKER_LABEL.match(memory.content)
    return match.group(1) if match else ""


def speaker_named(memory: Memory, query_words: Iterable[str]) -> float:
    """1.0 when the query names the memory's speaker (any word of the
    speaker's name, case ignored), else 0.0."""
    speaker = speaker_of(memory)
    if not speaker:
        return 0.0
    return 1.0 if set(all_words(speaker)) & set(query_words) else 0.0


@dataclass(frozen=True, slots=True)
class Timed:
    """One scored candidate as the neighbourhood sees it."""

    timestamp: float  # seconds since the epoch
    score: float
    order: float = 0.0  # orders equal timestamps: when the memory was stored (seconds since the epoch)


def neighbourhood(items: Sequence[Timed], seconds: float, adjacent: int = 0) -> list[float]:
    """For each item, the best score among the items within `seconds` of its
    timestamp (itself included), in the items' order; with `adjacent`, only
    among those at most that many places before or after it in time order.
    Linear after a sort:
    the window of each item, in time order, is a contiguous run whose ends
    only move forward, so a monotonic queue holds its maximum."""
    if not items:
        return []
    if adjacent > 0:
        return _adjacent(items, seconds, adjacent)
    order = sorted(range(len(items)), key=lambda i: items[i].timestamp)
    best = [0.0] * len(items)
    window: deque[int] = deque()  # positions in `order`, scores decreasing
    hi = 0
    lo = 0
    for index in order:
        at = items[index].timestamp
        while hi < len(order) and items[order[hi]].timestamp <= at + seconds:
            while window and items[order[window[-1]]].score <= items[order[hi]].score:
                window.pop()
            window.append(hi)
            hi += 1
        while items[order[lo]].timestamp < at - seconds:
            lo += 1
        while window[0] < lo:
            window.popleft()
        best[index] = items[order[window[0]]].score
    return best


def _adjacent(items: Sequence[Timed], seconds: float, adjacent: int) -> list[float]:
    """neighbourhood with `adjacent`: the best score among the items at most
    `adjacent` places away in (timestamp, order) order and within `seconds`.
    O(n x adjacent) after the sort."""
    order = sorted(range(len(items)), key=lambda i: (items[i].timestamp, items[i].order))
    best = [0.0] * len(items)
    for place, index in enumerate(order):
        at = items[index].timestamp
        near = order[max(0, place - adjacent) : place + adjacent + 1]
        best[index] = max(items[i].score for i in near if abs(items[i].timestamp - at) <= seconds)
    return best
