"""`python manage.py backfill_embeddings`: embed the rows that are missing or stale, in batches."""

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from tqdm import tqdm

from lessons.embedding import EmbeddingUnavailable
from lessons.error_text import first_line
from lessons.management.commands._stop_signal import stop_signal_as_interrupt
from lessons.management.commands._team_option import team_from_option
from lessons.services.embeddings import BACKFILL_KINDS, BackfillReport, embedding_backfill

SHOWN_IDS = 50  # failed ids listed in the summary; the rest are counted
# A PostgreSQL advisory lock held while a backfill writes: two at once both embedded every row and
# both reported it (676 encodes claimed for 338 rows).
BACKFILL_LOCK = 0x6D73_6266  # "msbf"


class Command(BaseCommand):
    help = (
        "Embed lessons and memories whose embedding is missing or stale (text or model changed), in "
        "primary-key order and committed batch by batch: an interrupted run keeps what it finished."
    )

    def add_arguments(self, parser):
        parser.add_argument("--kind", choices=BACKFILL_KINDS, default="all", help="Which rows (default: all).")
        parser.add_argument("--team", help="Only this team (slug).")
        parser.add_argument("--all", action="store_true", dest="include_fresh", help="Re-embed fresh rows too.")
        parser.add_argument("--batch-size", type=int, default=64, help="Rows per encode and write (64).")
        parser.add_argument("--dry-run", action="store_true", help="Only count what would be embedded.")

    def handle(self, *args, kind, team, include_fresh, batch_size, dry_run, **options):
        team_obj = None
        if team is not None:
            team_obj = team_from_option(team)
        if batch_size < 1:
            raise CommandError(f"--batch-size must be at least 1, not {batch_size}")

        bar = None
        show_bar = options["verbosity"] > 0
        written = {"rows": 0, "total": None}  # rows of committed batches, for an interrupted run

        def progress(advance: int, total: int) -> None:
            nonlocal bar
            written["rows"] += advance
            written["total"] = total
            if bar is None and show_bar:
                bar = tqdm(total=total, unit="item", desc="embedding", file=self.stderr._out, dynamic_ncols=True)
            if bar is not None:
                bar.update(advance)

        if not dry_run and not _lock_taken():
            raise CommandError(
                "another backfill_embeddings is writing to this database; wait for it to finish "
                "(a second one would embed the same rows again), or use --dry-run to count what is left"
            )
        try:
            with stop_signal_as_interrupt():
                report = embedding_backfill(
                    kind=kind,
                    team=team_obj,
                    include_fresh=include_fresh,
                    batch_size=batch_size,
                    dry_run=dry_run,
                    progress=progress,
                )
        except EmbeddingUnavailable as error:
            raise CommandError(f"the embedding model is unavailable, nothing was embedded: {error}") from error
        except (OperationalError, InterfaceError) as error:
            if written["total"] is None:  # never reached it, or lost it before the first batch
                raise  # manage.py says "the database is unavailable" with what to check, as every command does
            # The server went away (crash, restart, network): each batch is committed on its own,
            # so what was written is kept and a re-run embeds only the rest.
            reason = first_line(error)
            raise CommandError(
                f"the database connection was lost after {written['rows']} of {written['total']} row(s) were "
                f"written ({reason}); every finished batch is committed "
                "and kept: run backfill_embeddings again to embed the rest."
            ) from error
        finally:
            if bar is not None:
                bar.close()
            if not dry_run:
                _release_lock()

        if report.interrupted:
            left = report.pending - report.embedded - report.failed - report.changed
            if include_fresh:
                # the rest were fresh: a run without --all finds nothing to do, one with it starts over
                raise CommandError(
                    f"interrupted: {report.embedded} of {report.pending} row(s) re-embedded and committed, "
                    f"{report.failed} failed, {left} not re-embedded (they keep the vectors they had); "
                    "run the command with --all again to re-embed every row, from the start.",
                    returncode=130,
                )
            raise CommandError(
                f"interrupted: {report.embedded} of {report.pending} row(s) embedded and committed, "
                f"{report.failed} failed, {left} still pending; run the command again to continue.",
                returncode=130,
            )
        self.stdout.write(self._summary(report, dry_run=dry_run))
        if report.failed:
            raise CommandError(
                f"{report.failed} row(s) could not be embedded ({'; '.join(report.failure_reasons)}); "
                "they stay pending for the next run."
            )

    def _summary(self, report: BackfillReport, *, dry_run: bool) -> str:
        if dry_run:
            return f"dry run: {report.pending} to embed, {report.already_fresh} already fresh"
        lines = [f"embedded: {report.embedded}, already fresh: {report.already_fresh}, failed: {report.failed}"]
        for kind, ids in report.failed_ids.items():
            lines.append(f"failed {kind}: {_ids(ids)}")
        for kind, ids in report.changed_ids.items():
            lines.append(f"edited while embedding (left stale, their edit queued a new embedding) {kind}: {_ids(ids)}")
        return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    shown = ", ".join(str(pk) for pk in ids[:SHOWN_IDS])
    return shown + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")


def _lock_taken() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [BACKFILL_LOCK])
        return cursor.fetchone()[0]


def _release_lock() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [BACKFILL_LOCK])
    except DatabaseError:
        pass  # the connection is gone (and the lock with it), or its transaction failed: the process ends
