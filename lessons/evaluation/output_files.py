"""The files the measuring commands write (`--json`, eval_retrieval's `--hits`): never one the run
reads, and whole or not at all.

An output path naming one of the dataset's own files (`--hits ds/corpus.jsonl`, or a link to it)
replaced that file with the figures: it is refused before anything is read. An output is written
whole by lessons/output_files.py, as the exports are, with the option named in its errors and the
mode a plain write gives: a run stopped or failing half way (Ctrl-C, SIGTERM, a full disk) leaves
the previous run's file as it was (the hits file was opened for writing before the first search,
and a stopped run left it empty or cut mid-line), and a pipe or a device is written into.
"""

import json
import os
from collections.abc import Iterable
from pathlib import Path

from django.core.management.base import CommandError

from lessons.output_files import written_whole


def refuse_outputs_over_inputs(outputs: dict[str, Path | None], *, inputs: Iterable[Path]) -> None:
    """CommandError when an output (option -> path) is one of the files the run reads: the same
    file by name, through a symbolic link, or as a hard link of it."""
    inputs = list(inputs)
    for option, path in outputs.items():
        for source in inputs if path is not None else ():
            if _same_file(path, source):
                raise CommandError(f"{option}: cannot write {path}: it is the dataset's {source}, which this run reads")


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # either is missing (a new output file, a layout's optional file): not the same
        return False


def write_json_whole(path: Path, payload, *, stdout, option: str = "--json") -> None:
    with written_whole(path, option=option) as out:
        out.write(json.dumps(payload, indent=2) + "\n")
    stdout.write(f"wrote {path}")


def interrupted_error(*, unwritten: dict[str, Path | None], kept: str) -> CommandError:
    """The one line a stopped run ends with: each output not yet written and what stays."""
    outputs = [f"{option} {path} {'left as it was' if path.exists() else 'not written'}"
               for option, path in unwritten.items() if path is not None]
    return CommandError("interrupted (Ctrl-C or SIGTERM): " + "; ".join([*outputs, kept]), returncode=130)
