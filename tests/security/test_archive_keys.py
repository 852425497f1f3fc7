"""Archives forged under the default key (issue #34, item 1).

With no MEMHOUSE_SECRET_KEY and no MEMHOUSE_ARCHIVE_KEY, the signing key used to be
derived from the built-in secret key printed in the source: anyone could sign an archive
offline and `import_account` reported "signature verified". Now such a deployment signs
with a random key generated once into its data directory (mode 0600), and an archive
signed with the built-in-derived key is refused whatever key the deployment holds.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import stat
import tarfile

import pytest
from django.core.management import CommandError, call_command

from governance import archive
from knowledge.models import Account, Knowledge
from memhouse.core.tenancy import account_context
from tests.governance.helpers import active_about
from tests.governance.test_archive import _remove_account, _rewrite

pytestmark = pytest.mark.django_db(transaction=True)

# What an attacker reads in the source and computes offline.
BUILTIN_SECRET = "memhouse-insecure-local-key-change-me"
BUILTIN_DERIVED = hmac.new(BUILTIN_SECRET.encode(), b"memhouse.account-archive.signing-key.v1",
                           hashlib.sha256).digest()


@pytest.fixture
def default_keys(settings, tmp_path):
    """A deployment that set neither key, with its own data directory."""
    settings.SECRET_KEY = BUILTIN_SECRET
    settings.MEMHOUSE_ARCHIVE_KEY = ""
    settings.DATA_DIR = tmp_path / "data"
    return tmp_path / "data"


def _sign(key: bytes):
    def resign(manifest: bytes) -> bytes:
        return json.dumps({"alg": "hmac-sha256", "signature":
                           hmac.new(key, manifest, hashlib.sha256).hexdigest()}).encode()
    return resign


def test_an_archive_signed_offline_with_the_built_in_key_is_refused(committed_world, tmp_path,
                                                                   default_keys):
    w = committed_world
    with account_context(w.account.id):
        active_about(w, "Alice likes jazz.")
    path = tmp_path / "acme.tar.gz"
    out = io.StringIO()
    call_command("export_account", str(w.account.id), str(path), stdout=out)
    assert "signed with the generated key" in out.getvalue()
    key_file = default_keys / "archive.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert archive.signing_key().key not in (BUILTIN_DERIVED, BUILTIN_SECRET.encode())

    # The forger plants an active statement and signs with the key from the source.
    planted = tmp_path / "planted.tar.gz"
    _rewrite(path, planted, {"tables/knowledge.jsonl":
                             lambda d: d.replace(b"likes jazz", b"is the CEO's heir")})
    forged = tmp_path / "forged.tar.gz"
    with tarfile.open(planted) as tar:
        manifest = tar.extractfile("manifest.json").read()
    _rewrite(planted, forged, {"manifest.sig": lambda _: _sign(BUILTIN_DERIVED)(manifest)},
             resign_manifest=False)
    _remove_account(w.account.id)
    with pytest.raises(CommandError, match="built-in key"):
        call_command("import_account", str(forged), stdout=io.StringIO())
    # Not even an operator naming the built-in key (or its text) as theirs gets it in.
    for given in (BUILTIN_SECRET,):
        with pytest.raises(CommandError, match="built-in key"):
            call_command("import_account", str(forged), "--archive-key-file",
                         str(_write(tmp_path / "k", given)), stdout=io.StringIO())
    with account_context(w.account.id):
        assert not Account.objects.exists()

    # The genuine archive, signed with the generated key, still imports.
    call_command("import_account", str(path), stdout=io.StringIO())
    with account_context(w.account.id):
        assert Knowledge.objects.filter(statement__contains="likes jazz").exists()
        assert not Knowledge.objects.filter(statement__contains="heir").exists()


def test_the_generated_key_is_kept_and_a_set_secret_key_is_used_instead(settings,
                                                                       default_keys):
    first = archive.signing_key()
    assert first.source == "generated"
    assert archive.signing_key().key == first.key  # made once, then read
    settings.SECRET_KEY = "a-long-random-deployment-key-0123456789"
    assert archive.signing_key().source == "deployment"
    settings.MEMHOUSE_ARCHIVE_KEY = BUILTIN_SECRET
    with pytest.raises(archive.ArchiveError, match="built-in key"):
        archive.signing_key()


def _write(path, text: str):
    path.write_text(text + "\n")
    return path
