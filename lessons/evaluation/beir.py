"""Reading a dataset in the BEIR layout:

    corpus.jsonl     {"_id", "title", "text", "metadata"}   one document a line
    queries.jsonl    {"_id", "text", "metadata"}            one query a line (all splits)
    qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score, a header line first (CRLF or LF)

Problems are raised as `DatasetError` with the file and line, never as a traceback. A UTF-8
byte-order mark, which some editors write and the imports accept, is read past: at the start of a
file, and at the start of a JSON line (where files were joined).
"""

import json
from dataclasses import dataclass, field
from pathlib import Path


class DatasetError(ValueError):
    """The dataset cannot be read; the message names the file (and line)."""


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    metadata: dict = field(default_factory=dict)


@dataclass
class Dataset:
    name: str
    split: str
    documents: list[Document]
    queries: list[Query]  # only the judged queries of the split, in file order
    qrels: dict[str, dict[str, int]]  # query id -> {document id: score}


def dataset_files(directory: Path) -> list[Path]:
    """The files of the layout: what an output of the run must never replace."""
    return [directory / "corpus.jsonl", directory / "queries.jsonl", *sorted((directory / "qrels").glob("*.tsv"))]


def available_splits(directory: Path) -> list[str]:
    return sorted(path.stem for path in (directory / "qrels").glob("*.tsv"))


def read_dataset(directory: str | Path, *, split: str = "test") -> Dataset:
    root = Path(directory)
    if root.is_file():
        raise DatasetError(f"{directory}: a file; name the dataset's folder (corpus.jsonl, queries.jsonl, qrels/)")
    if not root.is_dir():
        raise DatasetError(f"{directory}: no such directory")
    if not split.strip():
        raise DatasetError("--split: blank; name a qrels/<split>.tsv (test, train, dev)")
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (root / name).is_file():
            raise DatasetError(f"{root / name}: missing (a BEIR dataset has corpus.jsonl, queries.jsonl, qrels/)")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        splits = available_splits(root)
        known = ", ".join(splits) if splits else "none"
        raise DatasetError(f"split {split!r}: {qrels_path} is missing (splits with qrels: {known})")

    qrels = read_qrels(qrels_path)
    queries = [query for query in read_queries(root / "queries.jsonl") if query.id in qrels]
    missing = sorted(set(qrels) - {query.id for query in queries})
    if missing:
        raise DatasetError(f"{qrels_path}: judged queries not in queries.jsonl: {', '.join(missing[:5])}")
    documents = read_corpus(root / "corpus.jsonl")
    # A judged document the corpus lacks could never be found: it would score as a silent miss.
    known_ids = {document.id for document in documents}
    unknown = sorted({doc_id for judged in qrels.values() for doc_id in judged} - known_ids)
    if unknown:
        raise DatasetError(f"{qrels_path}: judged documents not in corpus.jsonl: {', '.join(unknown[:5])}")
    return Dataset(
        name=root.resolve().name,
        split=split,
        documents=documents,
        queries=queries,
        qrels=qrels,
    )


def _json_lines(path: Path):
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                line = line.removeprefix("\ufeff")
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as error:
                    raise DatasetError(f"{path}:{number}: not JSON ({error.msg})") from error
                if not isinstance(data, dict):
                    raise DatasetError(f"{path}:{number}: expected a JSON object")
                yield number, data
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error


def _string(path: Path, number: int, data: dict, name: str, *, required: bool) -> str:
    value = data.get(name)
    if value is None and not required:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and name == "_id":
        return str(value)
    if not isinstance(value, str) or (required and not value.strip()):
        raise DatasetError(f"{path}:{number}: {name}: expected a non-empty string")
    if "\x00" in value:  # PostgreSQL stores no NUL in text: refused here, with its line, before any row is written
        raise DatasetError(f"{path}:{number}: {name}: contains a NUL character (\\u0000), which cannot be stored")
    return value


def _metadata(path: Path, number: int, data: dict) -> dict:
    value = data.get("metadata") or {}
    if not isinstance(value, dict):
        raise DatasetError(f"{path}:{number}: metadata: expected an object")
    return value


def read_corpus(path: Path) -> list[Document]:
    documents: dict[str, Document] = {}
    for number, data in _json_lines(path):
        doc_id = _string(path, number, data, "_id", required=True)
        if doc_id in documents:
            raise DatasetError(f"{path}:{number}: _id {doc_id!r} appears twice")
        title = _string(path, number, data, "title", required=False)
        text = _string(path, number, data, "text", required=False)
        if not title.strip() and not text.strip():  # a row needs a title (or content) to be stored
            raise DatasetError(f"{path}:{number}: _id {doc_id!r}: both title and text are empty")
        documents[doc_id] = Document(id=doc_id, title=title, text=text, metadata=_metadata(path, number, data))
    if not documents:
        raise DatasetError(f"{path}: no documents")
    return list(documents.values())


def read_queries(path: Path) -> list[Query]:
    return [
        Query(
            id=_string(path, number, data, "_id", required=True),
            text=_string(path, number, data, "text", required=True),
            metadata=_metadata(path, number, data),
        )
        for number, data in _json_lines(path)
    ]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> {corpus id: score}. The first line is the header; CRLF endings are fine."""
    qrels: dict[str, dict[str, int]] = {}
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split("\t")]
        if len(parts) != 3:
            raise DatasetError(f"{path}:{number}: expected query-id<TAB>corpus-id<TAB>score")
        query_id, doc_id, score = parts
        try:
            value = int(score)
        except ValueError as error:
            if number == 1:
                continue  # the header line ("query-id corpus-id score")
            raise DatasetError(f"{path}:{number}: score: expected a whole number, got {score!r}") from error
        qrels.setdefault(query_id, {})[doc_id] = value
    if not qrels:
        raise DatasetError(f"{path}: no judgments")
    return qrels
