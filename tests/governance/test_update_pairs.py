"""The learned update-pair model behind the update rules (issue 33 item 1): plain-JSON
weights, a compatible pair left alone, and a pair only the model settles written as a
contradiction (newer first, the older marked) over the real pipeline and PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from governance.intake.supersession import best_conflict, best_update
from governance.intake.update_pairs import (
    FORMAT,
    MODEL_PATH,
    SCALARS,
    PairClassifier,
    best_pair,
    default,
)
from governance.models import Validation
from knowledge.models import Relation
from memhouse.core.tenancy import account_context
from tests.governance.test_intake_quality import T0, post, rows
from tests.governance.test_read_time_conflicts import assert_newer_first

NAMES = frozenset({"alice"})
# Said a day apart by Alice; no frame or cue of the rules knows this wording (asserted
# below). The pair is from the model's training material (knowledge_fresh6): this tests
# the path from the model to the relation, not how the model generalises (that is
# bench/update_pairs_train.py's cross-validation).
OLD = "I drive an old Vauxhall Astra."
NEW = "The Astra finally died, so I bought a second-hand Skoda Fabia."


def _marked(world: Any) -> tuple[Any, Any]:
    """The older row (the Vauxhall) and a newer one marking it: every `contradicts` edge
    runs from a claim of the newer message ("bought a second-hand Skoda Fabia", "the
    Astra finally died") to the older row."""
    old = rows(world, "Vauxhall")[0]
    newer = {r.pk: r for r in rows(world, "Skoda") + rows(world, "finally died")}
    with account_context(world.account.id):
        edges = list(Relation.objects.filter(type="contradicts"))
    assert edges and {e.target_id for e in edges} == {old.pk}
    sources = {e.source_id for e in edges}
    assert sources <= set(newer)
    skoda = rows(world, "Skoda")[0]
    return old, skoda if skoda.pk in sources else newer[edges[0].source_id]


def test_the_shipped_weights_are_plain_json_that_loads() -> None:
    data = json.loads(MODEL_PATH.read_text())  # JSON, never a pickle
    assert data["format"] == FORMAT and data["scalars"] == list(SCALARS)
    model = PairClassifier.load()
    assert 0.5 <= model.threshold < 1 and np.isfinite(model.weights).all()
    assert model.weights.shape == model.mean.shape == model.scale.shape


@pytest.mark.parametrize("change", [{"format": "pickle"}, {"scalars": ["length"]},
                                    {"weights": [0.0]}])
def test_a_model_file_that_is_not_this_featurisers_is_refused(change: dict[str, Any]) -> None:
    data = {**json.loads(MODEL_PATH.read_text()), **change}
    with pytest.raises(ValueError):
        PairClassifier.from_dict(data)


@pytest.mark.parametrize(("old", "new", "message"), [
    # same topic, both stay true (update_pairs.json's kind of negative)
    ("Alice works at Acme.", "Alice said the Acme office got a new coffee machine.",
     "The Acme office got a new coffee machine, finally decent coffee."),
    ("Alice has a dog called Rex.", "Alice took Rex to the vet for his jabs.",
     "Took Rex to the vet for his jabs, he was so brave."),
    # a conversation's topic continuation (LoCoMo's kind)
    ("Alice went to a support group last week.", "Alice said the support group was inspiring.",
     "The support group was so inspiring, I'm going again."),
])
def test_a_compatible_pair_is_not_marked(old: str, new: str, message: str) -> None:
    assert best_pair(new, [old], message=message, names=NAMES) is None


def test_the_rules_alone_do_not_settle_the_pair_the_model_does() -> None:
    old, new = "Alice drives an old Vauxhall Astra.", "Alice bought a second-hand Skoda Fabia."
    assert best_update(new, [old], names=NAMES) is None
    assert best_conflict(new, [old], names=NAMES, message=NEW) is None
    found = best_pair(new, [old], message=NEW, names=NAMES)
    assert found is not None and found[0] == 0 and found[1] >= default().threshold
    assert found[2] is False  # read as written: the new claim replaces the old one


@pytest.mark.django_db(transaction=True)
def test_a_pair_only_the_model_settles_is_a_contradiction_newer_first(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, OLD)
    post(live_server, keys.alice, NEW, at=T0 + timedelta(days=1))
    old, new = _marked(committed_world)
    assert (old.state, new.state) == ("active", "active")  # never a silent supersession
    with account_context(committed_world.account.id):
        review = Validation.objects.get(knowledge=old, kind="contradiction", status="open")
        assert review.reason == "f4_update_learned"
        assert not Relation.objects.filter(type="supersedes").exists()
    assert_newer_first(live_server, keys.alice, "What car does Alice drive?", old, new)


@pytest.mark.django_db(transaction=True)
def test_an_older_message_arriving_late_is_the_one_marked(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, NEW, at=T0 + timedelta(days=1))
    post(live_server, keys.alice, OLD)  # said a day earlier, arriving after
    old, new = _marked(committed_world)
    assert (old.state, new.state) == ("active", "active")
