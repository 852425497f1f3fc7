"""DRF permissions on the request's Principal, shared by every app's views."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions

from memhouse.core.errors import ApplicationError
from memhouse.core.principal import Principal


class IsAccountMember(permissions.BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, Principal)


class IsHuman(permissions.BasePermission):
    """Routes about the signed-in person (their knowledge, questions, tokens, password):
    an agent's or a peerless key gets 403 `human_only`, not a 404 that hides the route."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if not isinstance(request.user, Principal):
            return False  # 401 from DRF
        if not request.user.is_human:
            raise ApplicationError("human_only", "this route is for people signed in with a "
                                   "password or their login token; agent and machine keys "
                                   "cannot use it", status_code=403)
        return True


class IsHumanAdmin(IsHuman):
    """Account administration (people, roles, grants): 403 `human_only` for keys without a
    person, 403 `admin_only` for people who are not administrators."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        if not request.user.is_admin:
            raise ApplicationError("admin_only", "only account administrators may manage "
                                   "people, roles and scope grants", status_code=403)
        return True


class IsHumanCurator(permissions.BasePermission):
    message = "only human curators may make curator decisions"

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, Principal) and request.user.is_curator
