#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_site.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except KeyboardInterrupt:
        # Ctrl-C: one line, not a traceback. Commands write in committed steps (a batch, a line),
        # so what finished before it is kept; a re-run carries on.
        command = sys.argv[1] if len(sys.argv) > 1 else "manage.py"
        sys.stderr.write(f"\n{command}: interrupted (Ctrl-C); work committed before it is kept.\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
