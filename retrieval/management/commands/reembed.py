from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from knowledge.accounts import list_account_ids
from knowledge.models import Knowledge, Message
from memhouse.core.tenancy import account_context
from retrieval import recall
from retrieval.embedding import get_embedder
from retrieval.models import EmbeddingSpace, KnowledgeVector, MessageVector
from retrieval.vectors import EMBEDDABLE_STATES, embed_knowledge, embed_messages, space_ensure


class Command(BaseCommand):
    help = ("The explicit re-embed path: embed every statement and every source message "
            "(ask's source recall lane) that has no vector in the configured embedder's "
            "space (a space mismatch never reuses vectors). --drop-other-spaces removes "
            "vectors of every other space afterwards; --check only reports, and fails "
            "while statements or messages wait for a vector.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--account", help="only this Account id")
        parser.add_argument("--batch-size", type=int, default=128)
        parser.add_argument("--drop-other-spaces", action="store_true")
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument("--check", action="store_true",
                            help="report per Account, embed nothing, exit non-zero when "
                                 "statements have no vector in the configured space")

    def handle(self, *args: Any, **options: Any) -> None:
        embedder = get_embedder()
        ids = list_account_ids()
        if options["account"]:
            ids = [i for i in ids if str(i) == options["account"]]
            if not ids:
                raise CommandError(f"no Account {options['account']}")
        if options["check"]:
            self._check(embedder.identity, ids)
            return
        size = max(1, options["batch_size"])
        total = total_messages = 0
        for account_id in ids:
            with account_context(account_id):
                space = space_ensure(embedder.identity)
                todo = [str(k) for k in Knowledge.objects.filter(state__in=EMBEDDABLE_STATES)
                        .exclude(vectors__space=space).order_by("inserted_at")
                        .values_list("id", flat=True)]
            bar = tqdm(total=len(todo), desc=f"account {account_id}", unit="stmt",
                       disable=options["no_progress"] or not todo, file=self.stderr)
            for start in range(0, len(todo), size):
                chunk = todo[start:start + size]
                total += embed_knowledge(account_id, chunk, embedder=embedder)
                bar.update(len(chunk))
            bar.close()
            with account_context(account_id):
                embedded = set(MessageVector.objects.filter(space=space)
                               .values_list("message_id", flat=True))
                messages = [str(m) for m in Message.objects.order_by("inserted_at")
                            .values_list("id", flat=True) if m not in embedded]
            for start in range(0, len(messages), size):
                messages_done = embed_messages(account_id, messages[start:start + size],
                                               embedder=embedder)
                total_messages += messages_done
            if options["drop_other_spaces"]:
                with account_context(account_id):
                    others = EmbeddingSpace.objects.exclude(pk=space.pk)
                    dropped, _ = KnowledgeVector.objects.filter(space__in=others).delete()
                    dropped += MessageVector.objects.filter(space__in=others).delete()[0]
                self.stdout.write(f"{account_id}: dropped {dropped} vectors of other spaces")
            # The minimal profile's recall projection is rebuilt with the vectors.
            copies = recall.rebuild(account_id)
            self.stdout.write(f"{account_id}: recall projection rebuilt ({copies} documents)")
        self.stdout.write(f"embedded {total} statements and {total_messages} messages "
                          f"into {space}")

    def _check(self, identity: Any, ids: list[Any]) -> None:
        """Report without writing: not even the space row or its index is created."""
        waiting = 0
        for account_id in ids:
            with account_context(account_id):
                space = EmbeddingSpace.objects.filter(
                    provider=identity.provider, model=identity.model,
                    version=identity.version, dims=identity.dims).first()
                todo = Knowledge.objects.filter(state__in=EMBEDDABLE_STATES)
                if space is not None:
                    todo = todo.exclude(vectors__space=space)
                missing = todo.count()
                other = KnowledgeVector.objects.exclude(space=space).count() if space \
                    else KnowledgeVector.objects.count()
                messages = Message.objects.all()
                if space is not None:
                    messages = messages.exclude(id__in=MessageVector.objects.filter(
                        space=space).values("message_id"))
                missing_messages = messages.count()
            waiting += missing + missing_messages
            self.stdout.write(f"{account_id}: {missing} statements and {missing_messages} "
                              f"messages without a vector in {identity.key}; {other} "
                              f"statement vectors in other spaces")
        if waiting:
            raise CommandError(f"{waiting} statements or messages need `manage.py reembed` "
                               f"(semantic search reads only {identity.key})")
        self.stdout.write(f"every statement has a vector in {identity.key}")
