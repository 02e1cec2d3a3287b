import tomllib
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def test_pyproject_carries_the_same_pins_as_requirements():
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    declared = set(project["dependencies"]) | set(project["optional-dependencies"]["test"])
    lines = (PROJECT / "requirements.txt").read_text().splitlines()
    pinned = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert declared == pinned
