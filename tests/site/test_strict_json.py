import pytest

from lessons import strict_json


@pytest.mark.parametrize("text, key", [
    ('{"a": 1, "a": 1}', "a"),  # even with the same value: the writer's JSON is wrong somewhere
    ('{"a": 1, "b": {"c": 1, "d": 2, "c": 3}}', "c"),
    ('[{"x": 1}, {"y": 1, "y": 2}]', "y"),
    ('{"\\u00e9": 1, "\\u00e9": 2}', "\u00e9"),
])
def test_a_key_given_twice_is_refused_by_name(text, key):
    with pytest.raises(strict_json.DuplicateKey) as refused:
        strict_json.loads(text)
    assert refused.value.key == key and isinstance(refused.value, ValueError)


def test_json_without_a_repeated_key_reads_as_python_reads_it():
    text = '{"a": [1, {"a": 2}], "b": {"a": 3}, "c": null, "d": "\\u00e9"}'  # the same key in other objects
    assert strict_json.loads(text) == {"a": [1, {"a": 2}], "b": {"a": 3}, "c": None, "d": "\u00e9"}
    assert strict_json.loads(b'{"E": 1, "e": 2}') == {"E": 1, "e": 2}  # keys are case-sensitive
