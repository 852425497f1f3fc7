from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"

    def ready(self) -> None:
        from governance.tasks import on_knowledge_transition
        from knowledge.lifecycle import register_refresh_hook

        # A contributor leaving `active` sends the deductions derived from it to
        # needs_revalidation (checked by a task after commit).
        register_refresh_hook(on_knowledge_transition)
        # Storing a message or document version enqueues intake, which lives here.
        from governance import tasks
        from knowledge.ingest.services import register_intake_tasks

        register_intake_tasks(messages=tasks.process_messages,
                              document_version=tasks.process_document_version)
        # Registering a person links the claims held for naming them (intake.named).
        from governance.services import link_named_person
        from knowledge.services import register_peer_hook

        register_peer_hook(link_named_person)
