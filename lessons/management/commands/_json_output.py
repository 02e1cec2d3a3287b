"""`--json PATH` for the measuring commands (eval_retrieval, simulate_usage, bench_search,
bench_writes, load_test): the path is checked before any work starts, so a typo fails at once
instead of after an hour of measuring, and every command words the refusal the same way."""

import os
from pathlib import Path

from django.core.management.base import CommandError


def checked_json_path(value: str | None, *, option: str = "--json") -> Path | None:
    """The path, or None without the option; raises CommandError when the figures could not be written."""
    if not value:
        return None
    path = Path(value)
    folder = path.parent
    if path.is_dir():
        problem = "it is a folder"
    elif not folder.is_dir():
        problem = f"its folder {folder} does not exist"
    elif path.exists() and not os.access(path, os.W_OK):
        problem = "it is not writable"
    elif not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        problem = f"its folder {folder} is not writable"
    else:
        return path
    raise CommandError(f"{option}: cannot write {path}: {problem}")

