from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from knowledge.lifecycle import TransitionError
        from memhouse.core.errors import register_error

        # An edge the lifecycle refuses is the caller's conflict with the current state.
        register_error(TransitionError, lambda exc: (exc.code, str(exc), 409))
