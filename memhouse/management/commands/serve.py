"""`manage.py serve`: migrate, make sure the demo Account exists, run the server.

Secrets are never constants: the demo curator gets a random password, printed once when
it is created; the demo agent's key is minted (and printed) once and then kept, because
its secret is stored only as a hash and cannot be shown again; `--rotate-key` revokes it
and prints a new one.

Served mode also does the background work a single machine has no separate worker for
(`start_background_work`): with Celery in eager mode (no Redis), tasks would run inside
the web request that enqueued them, so the command points Celery at an in-process memory
broker and consumes it with one worker thread; and a sweeper thread re-enqueues messages
whose extraction never happened (a crash or a database outage after the 202). It also
runs the beat schedule in-process (memhouse/management/beat.py: the entries of
memhouse/core/celery_schedule.py that compose's `beat` runs, so expiry, revalidation and the
dream-time work happen under serve too); only one serve per database ticks (an advisory
lock), and `--no-beat` or MEMHOUSE_SERVE_BEAT=false turns it off for a deployment that
runs `celery beat` itself.

Before serving it collects the static files into STATIC_ROOT (WhiteNoise serves them with
DEBUG off), and, run as a command, it stops the embedded PostgreSQL it started when it
exits (Ctrl-C or SIGTERM), unless another process still uses that server.
"""

from __future__ import annotations

import logging
import secrets
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from knowledge import services
from knowledge.models import Account, Credential, Peer
from memhouse.core import served_url
from memhouse.core.tenancy import ACCOUNT_SCAN_SETTING, account_context, narrow_lookup

log = logging.getLogger(__name__)

DEMO_SLUG = "demo"
DEMO_CURATOR = "demo-curator"
DEMO_KEY_NAME = "demo key"
# Seconds between sweeps for messages accepted but never extracted.
SWEEP_EVERY_SECONDS = 180.0


@dataclass
class DemoSetup:
    account: Account
    key: str | None  # the plaintext key when minted now, else None
    key_prefix: str
    key_rotated: bool = False
    curator_password: str | None = None  # only on the start that created the curator
    notes: list[str] = field(default_factory=list)


def ensure_demo_account(*, rotate_key: bool = False) -> DemoSetup:
    """The demo Account with an agent and a human curator, and the agent's demo key.

    The key is reused across starts (its secret is unknown after the first); with
    `rotate_key` the existing demo keys are revoked and a new one is minted. The demo
    agent relays conversations (the README's examples ingest and read for the demo
    peers), so its key holds the act-for grant `all`."""
    password = None
    with transaction.atomic(), narrow_lookup(ACCOUNT_SCAN_SETTING, "on"):
        account = Account.objects.filter(slug=DEMO_SLUG).first()
    if account is None:
        password = secrets.token_urlsafe(12)
        with transaction.atomic():
            account = services.account_create(name="Demo", slug=DEMO_SLUG)
            services.scope_ensure(account_id=account.id, path="/demo")
            services.peer_create(account_id=account.id, key="demo-agent", kind="agent",
                                 display_name="Demo agent")
            services.peer_create(account_id=account.id, key=DEMO_CURATOR, kind="human",
                                 display_name="Demo curator", password=password,
                                 is_curator=True, is_admin=True)
    with account_context(account.id):
        agent = Peer.objects.get(key="demo-agent")
        now = timezone.now()
        live = [c for c in Credential.objects.filter(peer=agent, name=DEMO_KEY_NAME,
                                                     revoked_at__isnull=True).order_by("created_at")
                if c.expires_at is None or c.expires_at > now]
        if live and not rotate_key:
            return DemoSetup(account=account, key=None, key_prefix=live[-1].prefix,
                             curator_password=password)
        for cred in live:
            services.credential_revoke(credential=cred, actor="system:serve")
        cred, key = services.credential_create(account_id=account.id, peer=agent,
                                               name=DEMO_KEY_NAME, act_for_all=True)
    return DemoSetup(account=account, key=key, key_prefix=cred.prefix,
                     key_rotated=bool(live), curator_password=password)


# --- background work in served mode -----------------------------------------------------

def sweep_unprocessed() -> int:
    """One sweep for accepted but unextracted messages. The one import to re-point if the
    sweeper task moves (it is called as a function here, not sent to a queue)."""
    from governance.tasks import sweep_unprocessed as sweep

    return int(sweep())


@dataclass
class BackgroundWork:
    """What `start_background_work` started; `stop()` ends it and restores Celery."""

    stop_event: threading.Event
    threads: list[threading.Thread]
    restore: list[Callable[[], None]]
    worker: Any = None

    def stop(self, timeout: float = 10.0) -> None:
        self.stop_event.set()
        # The beat first: it may still publish to the worker's broker.
        for thread in [t for t in self.threads if t.name == "memhouse-beat"]:
            thread.join(timeout)
        if self.worker is not None:
            self.worker.stop(in_sighandler=False)
        for thread in self.threads:
            thread.join(timeout)
        for undo in reversed(self.restore):
            undo()


def _reset_producer_pool(app: Any) -> None:
    # A pool opened for the previous broker must not be reused for the new one.
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


def _start_inprocess_worker(app: Any, work: BackgroundWork) -> None:
    """Eager mode runs every task inside the request that enqueued it (extraction of a
    20,000-character message takes seconds of a web thread). Instead: a kombu memory
    broker in this process and one Celery worker thread (solo pool) consuming it. Tasks
    queued in memory are lost if the process dies; the sweeper below finds those
    messages again, as it does for a lost Redis dispatch."""
    from celery._state import _set_task_join_will_block, task_join_will_block
    from celery.worker import WorkController

    previous = {"task_always_eager": app.conf.task_always_eager,
                "broker_url": app.conf.broker_url}
    joins_blocked = task_join_will_block()
    app.conf.task_always_eager = False
    # With a host named, kombu does not warn that it reverted to one; the worker's
    # "Connected to memory://" is no news for a broker inside this process.
    app.conf.broker_url = "memory://localhost/"
    logging.getLogger("celery.worker.consumer.connection").setLevel(logging.WARNING)
    _reset_producer_pool(app)

    def restore() -> None:
        app.conf.update(previous)
        _reset_producer_pool(app)
        # A starting worker marks the whole process as inside a worker (result.get()
        # then refuses to block); once it is gone, this process is not.
        _set_task_join_will_block(joins_blocked)

    work.restore.append(restore)
    started = threading.Event()

    class _Worker(WorkController):  # type: ignore[misc]
        def on_consumer_ready(self, consumer: Any) -> None:
            started.set()

    app.finalize()
    # Consume every queue tasks are sent to (the default and the named ones of
    # settings.MEMHOUSE_QUEUE_TASKS), whatever an earlier worker in this process selected
    # (Celery keeps the consume-from set on the app).
    worker = _Worker(app=app, concurrency=1, pool="solo", hostname="serve@memhouse",
                     queues=[app.conf.task_default_queue, *settings.MEMHOUSE_QUEUE_TASKS],
                     without_heartbeat=True, without_mingle=True, without_gossip=True,
                     ready_callback=None, loglevel="WARNING")

    def run() -> None:
        try:
            worker.start()
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="memhouse-worker", daemon=True)
    thread.start()
    if not started.wait(30):
        log.warning("the in-process worker did not report ready within 30 s")
    work.worker = worker
    work.threads.append(thread)


def _start_sweeper(work: BackgroundWork, every: float) -> None:
    def run() -> None:
        while not work.stop_event.wait(every):
            try:
                queued = sweep_unprocessed()
                if queued:
                    log.info("sweeper re-enqueued %d unextracted messages", queued)
            except Exception:  # a database outage must not end the loop
                log.warning("sweep for unprocessed messages failed", exc_info=True)
            finally:
                close_old_connections()
                connection.close()

    thread = threading.Thread(target=run, name="memhouse-sweeper", daemon=True)
    thread.start()
    work.threads.append(thread)


def _start_beat(app: Any, work: BackgroundWork, beat: Any) -> None:
    """The beat schedule in a thread (memhouse/management/beat.py): it publishes due
    entries to the in-process worker (eager mode) or the configured broker's workers."""
    from memhouse.core.celery_schedule import report_beat

    report_beat({"state": "starting"})
    thread = threading.Thread(target=beat.run, args=(work.stop_event,), name="memhouse-beat",
                              daemon=True)
    thread.start()
    work.threads.append(thread)
    work.restore.append(lambda: report_beat(None))


def start_background_work(*, sweep_every: float = SWEEP_EVERY_SECONDS,
                          beat: bool = False) -> BackgroundWork:
    """Start served mode's background threads: the in-process worker when Celery is in
    eager mode (with a broker configured, the deployment runs real workers), the
    periodic sweeper in either case (harmless next to beat's: re-enqueued work is
    idempotent), and with `beat` the in-process beat (after the worker, whose memory
    broker it publishes to)."""
    from memhouse.celery import app

    work = BackgroundWork(stop_event=threading.Event(), threads=[], restore=[])
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _start_inprocess_worker(app, work)
    _start_sweeper(work, sweep_every)
    if beat:
        from memhouse.management.beat import InProcessBeat

        _start_beat(app, work, InProcessBeat(
            app, heartbeat=not settings.CELERY_TASK_ALWAYS_EAGER))
    return work


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM ends the server as Ctrl-C does, so the cleanup below runs.
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Migrate, make sure the demo Account exists, print its credentials and run the server."

    def run_from_argv(self, argv: list[str]) -> None:
        """As the process's own command (not call_command inside another program, such as
        a test run, which owns the server's lifetime itself): SIGTERM interrupts like
        Ctrl-C, and on the way out the embedded server this process started is stopped."""
        from memhouse.core import embedded_db

        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            super().run_from_argv(argv)
        finally:
            signal.signal(signal.SIGTERM, previous)
            done = embedded_db.release()
            if done is not None:
                self.stdout.write(f"Embedded PostgreSQL: {done}.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-run", action="store_true", help="set up and print, then exit")
        parser.add_argument("--rotate-key", action="store_true",
                            help="revoke the demo agent's key and print a new one")
        parser.add_argument("--sweep-every", type=float, default=SWEEP_EVERY_SECONDS,
                            help="seconds between sweeps for unextracted messages")
        parser.add_argument("--no-beat", action="store_true",
                            help="do not run the beat schedule in this process (a deployment "
                                 "that runs `celery -A memhouse beat`); also "
                                 "MEMHOUSE_SERVE_BEAT=false")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.core.exceptions import ImproperlyConfigured

        from memhouse.checks import require_safe_secret_key

        host = options["addrport"].rsplit(":", 1)[0] if ":" in options["addrport"] else (
            "127.0.0.1")
        try:  # fail fast, before any setup, rather than serve with the built-in key
            require_safe_secret_key(bind_host=host.strip("[]"))
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        call_command("migrate", interactive=False, verbosity=0)
        if not options["no_run"]:
            # Before the server builds its handler: WhiteNoise indexes STATIC_ROOT once.
            call_command("collectstatic", interactive=False, verbosity=0)
        demo = ensure_demo_account(rotate_key=options["rotate_key"])
        base = served_url.base_for(options["addrport"])
        if not options["no_run"]:
            served_url.record(base)  # `people ... --invite` links point here
        out = self.stdout.write
        out(self.style.SUCCESS("MemHouse is ready."))
        out(f"  Account:        {demo.account.slug} ({demo.account.id})")
        if demo.key is not None:
            how = ("rotated: the previous demo key is revoked" if demo.key_rotated
                   else "new; shown only now")
            out(f"  API key:        {demo.key}   (agent peer 'demo-agent'; {how})")
            out(f"  Try:            curl -H 'Authorization: Bearer {demo.key}' {base}/api/v1/me")
        else:
            out(f"  API key:        mh_{demo.key_prefix}_...   (kept from an earlier start; "
                "its secret was shown then. `serve --rotate-key` revokes it and prints a "
                "new one)")
        if demo.curator_password is not None:
            out(f"  Console:        {base}/console/  ({DEMO_CURATOR} / {demo.curator_password}"
                "   shown only now)")
        else:
            out(f"  Console:        {base}/console/  ({DEMO_CURATOR}; password shown when "
                f"it was created; reset with `manage.py changepassword {DEMO_CURATOR}`)")
        if not options["no_run"]:
            from memhouse.core.celery_schedule import BEAT_SCHEDULE, report_beat

            beat = settings.MEMHOUSE_SERVE_BEAT and not options["no_beat"]
            work = start_background_work(sweep_every=options["sweep_every"], beat=beat)
            mode = ("in-process worker thread" if settings.CELERY_TASK_ALWAYS_EAGER
                    else "the configured Celery workers")
            out(f"  Background:     {mode}; sweeper every {options['sweep_every']:.0f}s")
            if beat:
                out(f"  Beat:           in-process, the {len(BEAT_SCHEDULE)} entries of "
                    "memhouse/core/celery_schedule.py (expiry, revalidation, dream-time); one "
                    "serve per database ticks, others stand by; /readyz shows it. Off: "
                    "--no-beat or MEMHOUSE_SERVE_BEAT=false")
            else:
                why = "--no-beat" if options["no_beat"] else "MEMHOUSE_SERVE_BEAT=false"
                report_beat({"state": "disabled", "detail": f"{why}: run `celery -A "
                             "memhouse beat` (exactly one per deployment)"})
                work.restore.append(lambda: report_beat(None))
                out(f"  Beat:           off ({why}); run `celery -A memhouse beat` once per "
                    "deployment, or expiry, revalidation and dream-time work never run")
            try:
                call_command("runserver", options["addrport"], use_reloader=False)
            finally:
                work.stop()
