"""JSON read as the store's writers mean it: an object that names a key twice is refused.

Python's reader keeps the last of two equal keys without a word, so `{"confidence": 0.9, ...,
"confidence": 0.1}` stored 0.1 where the writer (a template, two dicts joined by hand) may have
meant either. RFC 8259 leaves such an object's meaning to its reader; the API, the imports and the
MCP server refuse it and name the key."""

import json


class DuplicateKey(ValueError):
    """An object in the JSON names `key` more than once."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"the key {json.dumps(key)} appears twice in one object; send each key once")


def _object(pairs: list) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):  # the rare case: find which key came twice
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return result


def loads(text: str | bytes):
    """`json.loads`, refusing an object with a key given twice (`DuplicateKey`, a ValueError)."""
    return json.loads(text, object_pairs_hook=_object)
