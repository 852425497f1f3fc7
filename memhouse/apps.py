from django.apps import AppConfig


class MemhouseConfig(AppConfig):
    """The wiring on top of every app: deploy checks, the model-call meter, and the
    commands that start everything (`manage.py serve`, `manage.py api_doc`)."""

    name = "memhouse"

    def ready(self) -> None:
        from memhouse import checks  # noqa: F401  (registers the deploy system checks)
        from memhouse.core.metering import register_model_call_recorder
        from memhouse.usage import record_model_call

        register_model_call_recorder(record_model_call)
