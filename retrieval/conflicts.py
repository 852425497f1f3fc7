"""Contradictions settled at read time: the newer of a pair first, the older marked.

Intake links two current claims that say otherwise about the same attribute with a
`contradicts` relation from the newer (by when it was said) to the older one
(governance.intake.supersession) when it is not sure the newer is an update, and when
someone other than the source says otherwise. Until the subject or a curator settles the
pair, every read puts the newer one first and marks the older `possibly_outdated` with
the newer one's id, in the structured payload and in rendered text.

Each read path asks once: `outdated_by` is one query however many candidates, and it
only reports a newer claim the reader may see (a claim the reader cannot read never
marks, nor names, anything).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.utils import timezone

from knowledge.models import Relation
from knowledge.selectors import readable_scopes_q, visible_knowledge
from memhouse.core.principal import Reader

T = TypeVar("T")
FIELD = "possibly_outdated"


def outdated_by(*, reader: Reader, ids: Iterable[Any],
                scope_ids: Iterable[uuid.UUID] | None = None,
                at: datetime | None = None) -> dict[str, str]:
    """{older_id: newer_id} for the unsettled contradictions whose older claim is among
    `ids` and whose newer claim the reader may see (within `scope_ids` when given, else
    any scope the reader may read). One query. With several newer claims against one
    older, the most recently linked wins."""
    wanted = [i if isinstance(i, uuid.UUID) else uuid.UUID(str(i)) for i in ids]
    if not wanted:
        return {}
    newer = visible_knowledge(reader=reader, scope_ids=scope_ids, at=at or timezone.now())
    if scope_ids is None:
        newer = newer.filter(readable_scopes_q(reader))
    rows = (Relation.objects.filter(account_id=reader.account_id,
                                    type=Relation.Type.CONTRADICTS, settled_at__isnull=True,
                                    target_id__in=wanted,
                                    source_id__in=newer.values("id"))
            .order_by("created_at").values_list("target_id", "source_id"))
    return {str(older): str(new) for older, new in rows}


def newer_first(items: Sequence[T], marks: dict[str, str], *, id_of: Callable[[T], str]
                ) -> list[T]:
    """`items` with each newer claim of a marked pair moved to just before its older one
    (when both are in the list); everything else keeps its order."""
    if not marks:
        return list(items)
    order = list(items)
    position = {id_of(x): n for n, x in enumerate(order)}
    for older, newer in marks.items():
        if older in position and newer in position and position[newer] > position[older]:
            item = order.pop(position[newer])
            order.insert(position[older], item)
            position = {id_of(x): n for n, x in enumerate(order)}
    return order


# How far down the fused list a read looks for older claims whose newer one it must show.
PULL_WINDOW = 100


def pull_newer(fused: Sequence[T], marks: dict[str, str], *, id_of: Callable[[T], str],
               make: Callable[[str, T], T]) -> list[T]:
    """`fused` with the newer claim of each marked pair placed just before its older one:
    moved up from further down the list or, when no strategy found it, added there
    (`make(newer_id, older)`). A read that shows the older claim of an unsettled pair
    shows the newer one with it: the newer one often shares no word with the question
    ("Which bank?" finds "banks with Barclays", not "moved all their accounts to Monzo").
    The whole list is reordered, not a page, so pages continue the same order."""
    if not marks:
        return list(fused)
    order = list(fused)
    for older, newer in marks.items():
        at = next((n for n, x in enumerate(order) if id_of(x) == older), None)
        if at is None:
            continue
        was = next((n for n, x in enumerate(order) if id_of(x) == newer), None)
        if was is not None and was < at:
            continue  # already before it
        item = order.pop(was) if was is not None else make(newer, order[at])
        order.insert(at, item)
    return order


def mark(entries: list[dict[str, Any]], marks: dict[str, str], *, key: str = "id"
         ) -> list[dict[str, Any]]:
    """Dict entries in newer-first order, each carrying `possibly_outdated` (the newer
    claim's id, or None)."""
    ordered = newer_first(entries, marks, id_of=lambda e: str(e[key]))
    for e in ordered:
        e[FIELD] = marks.get(str(e[key]))
    return ordered


def suffix(newer_id: str | None) -> str:
    """What a rendered line says of an older claim of an unsettled pair."""
    return f" (possibly outdated: see {newer_id})" if newer_id else ""
