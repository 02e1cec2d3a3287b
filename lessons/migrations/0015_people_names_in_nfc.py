"""People's names in one Unicode form (NFC) in rows written before the services normalised them:
"Zoë" typed with a combining diaeresis and "Zoë" typed as one letter were two friends.

Only rows with a non-ASCII name are read (an ASCII name is already NFC); each is rewritten with
`normalise_names`, the services' own rule (blanks and exact duplicates go, order kept), by an
UPDATE that leaves `updated_at` alone: the memory did not change for its owner.
"""

from django.db import migrations
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL


def names_to_nfc(apps, schema_editor):
    from lessons.services.common import normalise_names

    Memory = apps.get_model("lessons", "Memory")
    non_ascii = RawSQL("people::text ~ %s", [r"[^\x01-\x7f]"], output_field=BooleanField())
    rows = Memory.objects.filter(non_ascii).values_list("pk", "people")
    for pk, people in rows.iterator(chunk_size=500):
        names = normalise_names(people)
        if names != list(people):
            Memory.objects.filter(pk=pk).update(people=names)


class Migration(migrations.Migration):
    dependencies = [("lessons", "0014_team_slugs_in_lowercase")]

    operations = [migrations.RunPython(names_to_nfc, migrations.RunPython.noop)]
