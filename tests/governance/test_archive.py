"""Account archives: export, remove the Account, import, and every durable row is back;
the audit chain verifies against the manifest head; derived data is rebuilt; content
erased after the export stays erased."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from governance import archive, erasure, services
from governance.models import ErasureRecord, Validation
from knowledge import audit
from knowledge import services as ks
from knowledge.ingest.services import document_create, document_version_add
from knowledge.lifecycle import transition
from knowledge.models import Account, AuditEntry, DocumentChunk, Knowledge, Relation, Session
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context
from retrieval.models import KnowledgeVector
from tests.governance.helpers import (
    active_about,
    held_scope_claim,
    message,
    propose,
    provisional_about,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _populate(w) -> dict[str, Any]:
    """Data in many states, with documents, sessions, relations and an erasure."""
    with account_context(w.account.id):
        dave = ks.peer_create(account_id=w.account.id, key="dave", kind="human",
                              display_name="Dave", is_admin=True)
        session = Session.objects.create(account=w.account, scope=w.scope, external_id="s1",
                                         metadata={"channel": "#social"})
        liked = active_about(w, "Alice likes jazz.")
        provisional_about(w, "Alice prefers tea.", confidence=0.8)
        held_scope_claim(w, "The social team posts on Tuesdays.")
        contested = active_about(w, "Alice dislikes cats.")
        services.knowledge_contest(item=contested, actor=w.subject, reason="I love cats")
        redacted = active_about(w, "Alice has a dentist appointment.")
        services.knowledge_redact(item=redacted, actor=w.subject, reason="private")
        promoted = active_about(w, "Alice leads the rota.")
        services.knowledge_promote(item=promoted, actor=w.curator, level="scope")
        stale = provisional_about(w, "Alice owns a kayak.")
        transition(stale, "stale", actor="system:test",
                   reason="f4_revalidation_confidence_decay", confidence=0.35)
        Relation.objects.create(account=w.account, source=liked, target=contested,
                                type="related")
        from knowledge.models import Scope, ScopeRelation

        ScopeRelation.objects.create(account=w.account, source=w.scope,
                                     target=Scope.objects.get(path="/marketing"),
                                     created_by=dave)
        p = Principal(account_id=w.account.id, peer=w.agent, via="api_key",
                      act_for_all=True)
        v1 = document_create(principal=p, scope_path="/marketing", title="Plan",
                             content=b"Dana leads the copy team.\n\nLaunch in March.")
        document_version_add(principal=p, document=v1.document,
                             content="Launch in May \u2713 (caf\u00e9).".encode())
        msg = message(w, "A message that will be erased before the export.")
        propose(w, "Alice mentioned a secret.", subject=w.subject, source=msg)
        erasure.message_erase(actor=dave, message_id=msg.pk)
        from knowledge.models import UsageEntry

        UsageEntry.objects.create(account=w.account, kind="search", units=3, peer_key="dave")
        said = message(w, "Alice said she runs marathons.", speaker=w.subject)
        marathons = propose(w, "Alice runs marathons.", subject=w.subject, source=said)
        transition(marathons, "active", actor="system:test", reason="f4_gate_a_b_accepted")
        from knowledge.models import Message

        Message.objects.filter(pk=said.pk).update(metadata={"s": session.external_id})
    return {"said": said.pk, "marathons": marathons.pk, "dave": dave}


def _snapshot(account_id) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    with account_context(account_id):
        for name, model in archive.tables():
            qs = archive._queryset(name, model, account_id)
            rows = []
            for row in qs.values():
                rows.append({k: bytes(v) if isinstance(v, memoryview) else v
                             for k, v in row.items()})
            out[name] = sorted(rows, key=lambda r: str(r.get("id", r.get("pk"))))
    return out


def _remove_account(account_id) -> None:
    """Test-only: delete every row of the Account (the durable erasure ledger stays).
    As the table owner we may disable the append-only triggers around the deletes."""
    with account_context(account_id), connection.cursor() as cur:
        cur.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'account_id'
               WHERE n.nspname = 'public' AND c.relkind = 'r'
                 AND c.relname <> 'memhouse_erasure_record'""")
        tables_ = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT user_id FROM memhouse_peer WHERE user_id IS NOT NULL")
        users = [r[0] for r in cur.fetchall()]
        for t in tables_:
            cur.execute(f"ALTER TABLE {t} DISABLE TRIGGER USER")
        for t in tables_:
            cur.execute(f"DELETE FROM {t} WHERE account_id = %s", [account_id])
        cur.execute("DELETE FROM memhouse_account WHERE id = %s", [account_id])
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # run the deferred FK checks now
        for t in tables_:
            cur.execute(f"ALTER TABLE {t} ENABLE TRIGGER USER")
    with transaction.atomic():
        get_user_model().objects.filter(pk__in=users).delete()
    with account_context(account_id):
        assert not Knowledge.objects.exists() and not AuditEntry.objects.exists()


def _export(w, path) -> tuple[dict[str, Any], str]:
    out = io.StringIO()
    call_command("export_account", str(w.account.id), str(path), stdout=out)
    with tarfile.open(path) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    return manifest, out.getvalue()


def test_round_trip_restores_every_durable_row(committed_world, tmp_path):
    w = committed_world
    _populate(w)
    before = _snapshot(w.account.id)
    assert [name for name, rows in before.items() if not rows] == []  # every table has data
    path = tmp_path / "acme.tar.gz"
    manifest, log = _export(w, path)
    assert "knowledge: " in log and "audit head seq=" in log
    assert manifest["tables"]["knowledge"]["rows"] == len(before["knowledge"])
    assert manifest["tables"]["erasure_records"]["rows"] == 1
    assert manifest["audit_head"]["seq"] == len(before["audit_entries"])
    assert {k["state"] for k in before["knowledge"]} >= {
        "active", "provisional", "held", "contested", "redacted", "stale", "retracted"}
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
    assert "tables/knowledge_vectors.jsonl" not in names  # derived data is not archived
    assert "tables/document_versions.jsonl" in names and "tables/users.jsonl" in names

    _remove_account(w.account.id)
    out = io.StringIO()
    call_command("import_account", str(path), "--with-credentials", stdout=out)
    log = out.getvalue()
    assert "audit chain verified against the manifest head" in log
    after = _snapshot(w.account.id)
    for name in before:
        assert after[name] == before[name], name
    with account_context(w.account.id):
        head = manifest["audit_head"]
        assert audit.verify(w.account.id, expected_head=(head["seq"], head["hash"])).ok
        # Derived data is rebuilt: chunks re-cut, vectors for embeddable statements.
        assert DocumentChunk.objects.count() >= 3
        embeddable = Knowledge.objects.filter(state__in=["active", "provisional", "held",
                                                          "contested", "stale"])
        assert KnowledgeVector.objects.filter(knowledge__in=embeddable).count() == \
            embeddable.count()
    # The Account works after the import: governance carries on from the archived state.
    with account_context(w.account.id):
        contested = Knowledge.objects.get(state="contested")
        carol = w.curator.__class__.objects.get(key="carol")
        services.contest_resolve(item=contested, actor=carol, outcome="for")
        assert audit.verify(w.account.id).ok
    # Importing again refuses: the Account exists.
    with pytest.raises(CommandError, match="already exists"):
        call_command("import_account", str(path), stdout=io.StringIO())


def test_import_skips_content_erased_after_the_export(committed_world, tmp_path):
    w = committed_world
    made = _populate(w)
    path = tmp_path / "acme.tar.gz"
    manifest, _ = _export(w, path)
    with account_context(w.account.id):
        erasure.message_erase(actor=made["dave"], message_id=made["said"])
        assert ErasureRecord.objects.count() == 2
    _remove_account(w.account.id)
    out = io.StringIO()
    call_command("import_account", str(path), stdout=out)
    assert "1 skipped" in out.getvalue()
    with account_context(w.account.id):
        from knowledge.models import Message

        assert not Message.objects.filter(pk=made["said"]).exists()
        k = Knowledge.objects.get(pk=made["marathons"])
        assert (k.state, k.state_reason, k.source_count) == ("retracted", "f4_source_erased", 0)
        assert ErasureRecord.objects.count() == 2  # the ledger outlived the Account row
        head = manifest["audit_head"]
        assert audit.verify(w.account.id, expected_head=(head["seq"], head["hash"])).ok


def test_import_skips_an_erased_peer_and_everything_about_them(committed_world, tmp_path):
    w = committed_world
    made = _populate(w)
    with account_context(w.account.id):
        bob_fact = provisional_about(w, "Bob prefers window seats.", subject=w.member)
        Validation.objects.filter(knowledge=bob_fact).update(
            due_at=timezone.now() + timedelta(days=1))
    path = tmp_path / "acme.tar.gz"
    _export(w, path)
    with account_context(w.account.id):
        erasure.peer_erase(actor=made["dave"], peer_key="bob")
    _remove_account(w.account.id)
    call_command("import_account", str(path), stdout=io.StringIO())
    with account_context(w.account.id):
        from knowledge.models import Message, Peer

        assert not Peer.objects.filter(key="bob").exists()
        assert not Knowledge.objects.filter(pk=bob_fact.pk).exists()
        assert not Message.objects.filter(peer_id=w.member.pk).exists()
        assert Peer.objects.filter(key="alice").exists()
        assert audit.verify(w.account.id).ok
    assert not get_user_model().objects.filter(username="bob").exists()


def test_a_tampered_archive_is_refused(committed_world, tmp_path):
    w = committed_world
    with account_context(w.account.id):
        active_about(w, "Alice likes jazz.")
    path = tmp_path / "acme.tar.gz"
    _export(w, path)
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(path) as src, tarfile.open(bad, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if member.name == "tables/knowledge.jsonl":
                data = data.replace(b"jazz", b"jizz")
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    _remove_account(w.account.id)
    with pytest.raises(CommandError, match="manifest digest"):
        call_command("import_account", str(bad), stdout=io.StringIO())
    with account_context(w.account.id):
        assert not Account.objects.exists()


def test_exporting_an_unknown_account_is_a_clear_error(transactional_db, tmp_path):
    with pytest.raises(CommandError, match="no Account"):
        call_command("export_account", "00000000-0000-0000-0000-000000000001",
                     str(tmp_path / "x.tar.gz"), stdout=io.StringIO())
    assert not (tmp_path / "x.tar.gz").exists()


# --- trust: signatures, the out-of-band audit head, credentials, caps (issue #16) ---------

def _rewrite(src_path, dst_path, edits=None, *, resign_manifest=True, drop=()) -> None:
    """A forger's rewrite: edit members and recompute every checksum in the manifest (what
    anyone holding the archive can do); the signature member is copied as it was."""
    import hashlib

    edits = edits or {}
    with tarfile.open(src_path) as src:
        members = {m.name: src.extractfile(m).read() for m in src.getmembers()}
    for name, edit in edits.items():
        members[name] = edit(members[name])
    if resign_manifest:
        manifest = json.loads(members["manifest.json"])
        for name in manifest["tables"]:
            data = members[f"tables/{name}.jsonl"]
            manifest["tables"][name] = {"rows": data.count(b"\n"),
                                        "sha256": hashlib.sha256(data).hexdigest()}
        members["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True).encode()
    with tarfile.open(dst_path, "w:gz") as dst:
        for name, data in members.items():
            if name in drop:
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))


def _plant_key(data: bytes) -> tuple[bytes, str]:
    """Append a credential row for a key the forger knows, copied from a real one."""
    import uuid as uuid_

    from knowledge.credentials import hash_secret

    row = json.loads(data.splitlines()[0])
    key = "mh_forged_" + "x" * 40
    row.update({"id": str(uuid_.uuid4()), "prefix": "forged0001", "name": "planted",
                "secret_hash": hash_secret(key), "revoked_at": None, "expires_at": None})
    return data + (json.dumps(row) + "\n").encode(), key


def test_a_forged_archive_with_recomputed_checksums_is_refused(committed_world, tmp_path):
    w = committed_world
    with account_context(w.account.id):
        active_about(w, "Alice likes jazz.")
    path = tmp_path / "acme.tar.gz"
    _export(w, path)
    planted: dict[str, str] = {}

    def plant(data: bytes) -> bytes:
        data, planted["key"] = _plant_key(data)
        return data

    forged = tmp_path / "forged.tar.gz"
    _rewrite(path, forged, {
        "tables/credentials.jsonl": plant,
        "tables/knowledge.jsonl": lambda d: d.replace(b"likes jazz", b"hates jazz"),
        "tables/audit_entries.jsonl": lambda d: d.replace(b"credential.created",
                                                          b"credential.createx", 1),
    })
    unsigned = tmp_path / "unsigned.tar.gz"
    _rewrite(forged, unsigned, drop={"manifest.sig"})
    _remove_account(w.account.id)
    for bad, why in ((forged, "signature does not verify"), (unsigned, "not signed")):
        for extra in ((), ("--with-credentials",)):
            with pytest.raises(CommandError, match=why):
                call_command("import_account", str(bad), *extra, stdout=io.StringIO())
    with account_context(w.account.id):
        assert not Account.objects.exists()
    # The untouched archive still imports.
    call_command("import_account", str(path), stdout=io.StringIO())
    with account_context(w.account.id):
        assert Knowledge.objects.filter(statement__contains="likes jazz").exists()
        assert not Knowledge.objects.filter(statement__contains="hates jazz").exists()


def test_an_archive_signed_with_an_operator_key_needs_that_key(committed_world, tmp_path,
                                                              settings):
    w = committed_world
    key_file = tmp_path / "archive.key"
    key_file.write_text("operator-archive-key-0123456789abcdef\n")
    path = tmp_path / "acme.tar.gz"
    out = io.StringIO()
    call_command("export_account", str(w.account.id), str(path), "--archive-key-file",
                 str(key_file), stdout=out)
    assert "signed with the operator key" in out.getvalue()
    _remove_account(w.account.id)
    with pytest.raises(CommandError, match="signed with another key"):
        call_command("import_account", str(path), stdout=io.StringIO())
    settings.MEMHOUSE_ARCHIVE_KEY = "some-other-operator-key-456789"
    with pytest.raises(CommandError, match="signed with another key"):
        call_command("import_account", str(path), stdout=io.StringIO())
    call_command("import_account", str(path), "--archive-key-file", str(key_file),
                 stdout=io.StringIO())
    with account_context(w.account.id):
        assert Account.objects.filter(id=w.account.id).exists()


def test_the_audit_head_is_checked_against_the_value_export_printed(committed_world,
                                                                     tmp_path):
    w = committed_world
    with account_context(w.account.id):
        active_about(w, "Alice likes jazz.")
    path = tmp_path / "acme.tar.gz"
    manifest, log = _export(w, path)
    head = manifest["audit_head"]
    printed = f"--expect-audit-head {head['seq']}:{head['hash']}"
    assert printed in log
    _remove_account(w.account.id)
    for wrong in (f"{head['seq'] + 1}:{head['hash']}", "0" * 64):
        with pytest.raises(CommandError, match="not the expected one"):
            call_command("import_account", str(path), "--expect-audit-head", wrong,
                         stdout=io.StringIO())
    with pytest.raises(CommandError, match="SEQ:HASH"):
        call_command("import_account", str(path), "--expect-audit-head", "nonsense",
                     stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_account", str(path), "--expect-audit-head", head["hash"], stdout=out)
    assert "audit head matches the expected value" in out.getvalue()


def test_credentials_and_passwords_come_back_only_when_asked(committed_world, tmp_path):
    from knowledge.models import Credential

    w = committed_world
    path = tmp_path / "acme.tar.gz"
    _export(w, path)
    with account_context(w.account.id):
        keys = Credential.objects.count()
    assert keys >= 1
    _remove_account(w.account.id)
    out = io.StringIO()
    call_command("import_account", str(path), stdout=out)
    assert f"credentials: {keys} not imported" in out.getvalue()
    with account_context(w.account.id):
        assert not Credential.objects.exists()
    alice = get_user_model().objects.get(username="alice")
    assert not alice.has_usable_password()

    _remove_account(w.account.id)
    call_command("import_account", str(path), "--with-credentials", stdout=io.StringIO())
    with account_context(w.account.id):
        assert Credential.objects.count() == keys
    assert get_user_model().objects.get(username="alice").check_password("alice-pass-123")


def test_a_corrupt_truncated_or_oversized_archive_is_a_clear_error(committed_world, tmp_path,
                                                                   settings):
    w = committed_world
    path = tmp_path / "acme.tar.gz"
    _export(w, path)
    data = path.read_bytes()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 10)
    _remove_account(w.account.id)
    for bad in (truncated, garbage):
        with pytest.raises(CommandError, match="corrupt or truncated"):
            call_command("import_account", str(bad), stdout=io.StringIO())
    with pytest.raises(CommandError, match="no archive file"):
        call_command("import_account", str(tmp_path / "missing.tar.gz"), stdout=io.StringIO())
    # A small archive that unpacks to far more than the cap is refused while streaming.
    bomb = tmp_path / "bomb.tar.gz"
    _rewrite(path, bomb, {"tables/messages.jsonl": lambda d: d + b" " * (64 << 20)})
    assert bomb.stat().st_size < 2 << 20
    settings.MEMHOUSE_ARCHIVE_MAX_BYTES = 16 << 20
    with pytest.raises(CommandError, match="unpacks to more than"):
        call_command("import_account", str(bomb), stdout=io.StringIO())
    with account_context(w.account.id):
        assert not Account.objects.exists()


def test_an_archive_from_before_a_column_existed_imports_with_its_default(committed_world):
    from governance.archive import _columns, _decode
    from knowledge.models import Credential
    from memhouse.core.tenancy import account_context

    with account_context(committed_world.account.id):
        cred = Credential.objects.filter(account=committed_world.account).first()
    row = {f.attname: getattr(cred, f.attname) for f in _columns(Credential)}
    del row["act_for_all"], row["act_for"]  # exported before the act-for grant existed
    decoded = _decode(Credential, row)
    assert decoded.act_for_all is False and decoded.act_for == []
