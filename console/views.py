"""Console views. Sign-in is for humans: only Django users linked to a human Peer exist."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memhouse.authentication import principal_for_user


class LoginView(auth_views.LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    next_page = "/console/login/"


@login_required
def home(request: HttpRequest) -> HttpResponse:
    principal = principal_for_user(request.user)
    return render(request, "console/home.html", {"principal": principal})
