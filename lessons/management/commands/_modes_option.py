"""`--modes hybrid,semantic,text`: the search modes a measuring command runs, checked before it
loads or builds anything (bench_search found a bad mode after building a 10,000-lesson team,
and then with a traceback)."""

from django.core.management.base import CommandError

from lessons.search import MODES

DEFAULT_MODES = "hybrid,semantic,text"


def modes_from_option(value: str) -> list[str]:
    modes = [mode.strip() for mode in value.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES]
    if not modes:
        raise CommandError(f"--modes: name at least one mode of {', '.join(MODES)}")
    if unknown:
        raise CommandError(f"--modes: unknown mode(s) {', '.join(unknown)}; use {', '.join(MODES)}")
    return list(dict.fromkeys(modes))
