from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"

    def ready(self) -> None:
        # Every lifecycle state change dirties the affected context projections and
        # enqueues their rebuild on commit (retrieval.projections). Importing the task
        # modules registers them with workers (autodiscovery only finds `tasks` modules)
        # and hands projections its rebuild task.
        from knowledge.lifecycle import register_derived_rows, register_refresh_hook
        from retrieval import entity_tasks, projection_tasks, recall  # noqa: F401
        from retrieval.derived import drop_derived_rows
        from retrieval.projections import on_knowledge_change, on_knowledge_change_many

        register_refresh_hook(on_knowledge_change, many=on_knowledge_change_many)
        # Statements withdrawn from use lose their vectors and entity mentions.
        register_derived_rows(drop_derived_rows)
        # The minimal profile's recall copies follow every state change at once.
        register_refresh_hook(recall.on_knowledge_change, many=recall.on_knowledge_change_many)
        # A write's `wait` also waits for the vectors that make it searchable by meaning.
        from knowledge.indexing import register_index_pending
        from retrieval.vectors import index_pending

        register_index_pending(index_pending)
