from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"

    def ready(self) -> None:
        # Every lifecycle state change dirties the affected context projections and
        # enqueues their rebuild on commit (retrieval.projections). Importing the task
        # modules registers them with workers (autodiscovery only finds `tasks` modules)
        # and hands projections its rebuild task.
        from knowledge.lifecycle import register_refresh_hook
        from retrieval import entity_tasks, projection_tasks, recall  # noqa: F401
        from retrieval.projections import on_knowledge_change

        register_refresh_hook(on_knowledge_change)
        # The minimal profile's recall copies follow every state change at once.
        register_refresh_hook(recall.on_knowledge_change)
