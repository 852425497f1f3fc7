"""Input parsing for console forms. Validation of meaning stays in the services; these
forms only check shape (lengths, choices, ids) and turn errors into sentences."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms

from governance.services import MAX_MERGE, MAX_REASON_CHARS, MAX_STATEMENT_CHARS
from knowledge import lifecycle

MAX_BULK = 200
BULK_ACTIONS = {
    "approve": ("Approve", "approved"),
    "reject": ("Reject", "rejected"),
    "resolve_for": ("Resolve in favour of the statement", "resolved in favour"),
    "resolve_against": ("Resolve against the statement", "resolved against"),
}


def errors_in_words(form: forms.Form) -> str:
    """'Note: Ensure this value has at most 2000 characters.' and so on, one sentence each."""
    parts: list[str] = []
    for field, errors in form.errors.items():
        label = form.fields[field].label if field in form.fields else None
        prefix = f"{label or field.replace('_', ' ').capitalize()}: " if field != "__all__" else ""
        parts.extend(f"{prefix}{e}" for e in errors)
    return " ".join(parts) or "The form is not valid."


class NoteForm(forms.Form):
    note = forms.CharField(required=False, max_length=MAX_REASON_CHARS, label="Note",
                           strip=True)


class ResolveForm(NoteForm):
    outcome = forms.ChoiceField(choices=[("for", "In favour of the statement"),
                                         ("against", "Against the statement")],
                                label="Outcome")


class ContradictionForm(NoteForm):
    outcome = forms.ChoiceField(choices=[("keep", "Keep the current statement"),
                                         ("retire", "Retire the current statement")],
                                label="Outcome")


class RevalidationForm(NoteForm):
    outcome = forms.ChoiceField(choices=[("reconfirm", "Reconfirm the statement"),
                                         ("retire", "Retire the statement")],
                                label="Outcome")


class EditForm(NoteForm):
    # Whitespace, emptiness and "unchanged" are the service's rules (knowledge_edit).
    statement = forms.CharField(max_length=MAX_STATEMENT_CHARS, label="Corrected statement",
                                strip=True)


class CorrectForm(forms.Form):
    statement = forms.CharField(max_length=MAX_STATEMENT_CHARS, label="What is true now",
                                strip=True)
    reason = forms.CharField(required=False, max_length=MAX_REASON_CHARS, label="Reason",
                             strip=True)


class ReasonForm(forms.Form):
    # Whether a reason is required (contest) or optional (redact) is the service's rule.
    reason = forms.CharField(required=False, max_length=MAX_REASON_CHARS, label="Reason",
                             strip=True)
    confirmed = forms.CharField(required=False)

    @property
    def is_confirmed(self) -> bool:
        return self.cleaned_data.get("confirmed") == "yes"


class AnswerForm(forms.Form):
    answer = forms.CharField(max_length=20, label="Answer")


def _selected_ids(raw_ids: list[str]) -> list[uuid.UUID]:
    ids: list[uuid.UUID] = []
    for raw in raw_ids:
        try:
            value = uuid.UUID(str(raw))
        except ValueError:
            raise forms.ValidationError("One of the selected statements is not valid.",
                                        code="invalid_id") from None
        if value not in ids:
            ids.append(value)
    return ids


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[(k, v[0]) for k, v in BULK_ACTIONS.items()],
                               label="Action")
    note = forms.CharField(required=False, max_length=MAX_REASON_CHARS, label="Note")
    confirmed = forms.CharField(required=False)

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        self.raw_ids: list[str] = list(data.getlist("ids")) if data is not None else []

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        ids = _selected_ids(self.raw_ids)
        if not ids:
            raise forms.ValidationError("Choose at least one statement first.",
                                        code="no_selection")
        if len(ids) > MAX_BULK:
            raise forms.ValidationError(f"Choose at most {MAX_BULK} statements at once.",
                                        code="too_many")
        cleaned["ids"] = ids
        return cleaned


class MergeForm(forms.Form):
    """Two steps, like the bulk form: the selection (ids), then `confirmed=yes` with the
    merged statement's text (blank: the first statement's text) and a note."""

    statement = forms.CharField(required=False, max_length=MAX_STATEMENT_CHARS,
                                label="Merged statement", strip=True)
    note = forms.CharField(required=False, max_length=MAX_REASON_CHARS, label="Note",
                           strip=True)
    confirmed = forms.CharField(required=False)

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        self.raw_ids: list[str] = list(data.getlist("ids")) if data is not None else []

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        ids = _selected_ids(self.raw_ids)
        if not 2 <= len(ids) <= MAX_MERGE:
            raise forms.ValidationError(f"Choose 2 to {MAX_MERGE} statements to merge.",
                                        code="merge_size")
        cleaned["ids"] = ids
        return cleaned


class BrowseForm(forms.Form):
    q = forms.CharField(required=False, max_length=2000, label="Search", strip=True)
    state = forms.MultipleChoiceField(required=False, label="Lifecycle state",
                                      choices=[(s, s.replace("_", " ")) for s in lifecycle.STATES],
                                      widget=forms.CheckboxSelectMultiple)
    page = forms.IntegerField(required=False, min_value=1)


# --- people (administrators), passwords, invitations ------------------------------------

ROLE_CHOICES = [("member", "Member"), ("curator", "Curator"),
                ("admin", "Administrator (also a curator)")]


def _scope_list(text: str) -> list[str]:
    """'/a, /b/c' or one per line -> ['/a', '/b/c'] (the service checks each exists)."""
    return [p for p in (part.strip() for part in text.replace("\n", ",").split(",")) if p]


class PersonForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES, label="Role")
    scopes = forms.CharField(max_length=5000, label="Scopes", strip=True)
    display_name = forms.CharField(required=False, max_length=200, label="Name", strip=True)

    @property
    def scope_list(self) -> list[str]:
        return _scope_list(self.cleaned_data["scopes"])


class InviteForm(PersonForm):
    key = forms.CharField(max_length=200, label="Peer key", strip=True)
    username = forms.CharField(required=False, max_length=150, label="Username", strip=True)


class ActiveForm(forms.Form):
    active = forms.ChoiceField(choices=[("yes", "active"), ("no", "deactivated")])


class PasswordChangeForm(forms.Form):
    current_password = forms.CharField(max_length=200, strip=False,
                                       label="Current password")
    new_password = forms.CharField(max_length=200, strip=False, label="New password")
    new_password_again = forms.CharField(max_length=200, strip=False,
                                         label="New password, again")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("new_password") != data.get("new_password_again"):
            raise forms.ValidationError("The two new passwords differ.")
        return data


class InvitationAcceptForm(forms.Form):
    password = forms.CharField(max_length=200, strip=False, label="Password")
    password_again = forms.CharField(max_length=200, strip=False, label="Password, again")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("password") != data.get("password_again"):
            raise forms.ValidationError("The two passwords differ.")
        return data
