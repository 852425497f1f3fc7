from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from knowledge.models import Knowledge
from memhouse.tenancy import account_context, list_account_ids
from retrieval.embedding import get_embedder
from retrieval.models import EmbeddingSpace, KnowledgeVector
from retrieval.vectors import EMBEDDABLE_STATES, embed_knowledge, space_ensure


class Command(BaseCommand):
    help = ("The explicit re-embed path: embed every statement that has no vector in the "
            "configured embedder's space (a space mismatch never reuses vectors). "
            "--drop-other-spaces removes vectors of every other space afterwards.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--account", help="only this Account id")
        parser.add_argument("--batch-size", type=int, default=128)
        parser.add_argument("--drop-other-spaces", action="store_true")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        embedder = get_embedder()
        ids = list_account_ids()
        if options["account"]:
            ids = [i for i in ids if str(i) == options["account"]]
            if not ids:
                raise CommandError(f"no Account {options['account']}")
        size = max(1, options["batch_size"])
        total = 0
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
            if options["drop_other_spaces"]:
                with account_context(account_id):
                    others = EmbeddingSpace.objects.exclude(pk=space.pk)
                    dropped, _ = KnowledgeVector.objects.filter(space__in=others).delete()
                self.stdout.write(f"{account_id}: dropped {dropped} vectors of other spaces")
        self.stdout.write(f"embedded {total} statements into {space}")
