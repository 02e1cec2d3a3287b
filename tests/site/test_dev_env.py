"""`python -m memory_site.dev_env` (run by `make run`): a development .env, written once."""

import stat

from memory_site.dev_env import write_development_env


def test_writes_a_private_development_env_once(tmp_path):
    path = tmp_path / ".env"
    assert write_development_env(path) is True
    text = path.read_text()
    assert "DJANGO_DEBUG=1\n" in text and "DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost\n" in text
    secret = next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("DJANGO_SECRET_KEY="))
    assert len(secret) >= 50  # Django's check for a strong key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds a secret
    assert write_development_env(tmp_path / "other.env") and (tmp_path / "other.env").read_text() != text


def test_an_existing_env_is_never_touched(tmp_path):
    path = tmp_path / ".env"
    path.write_text("DJANGO_DEBUG=0\nDJANGO_SECRET_KEY=mine\n")
    assert write_development_env(path) is False
    assert path.read_text() == "DJANGO_DEBUG=0\nDJANGO_SECRET_KEY=mine\n"
