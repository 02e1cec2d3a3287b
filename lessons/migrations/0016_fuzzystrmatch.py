"""fuzzystrmatch (a contrib extension, like pg_trgm): a person search tolerates one typo in a name
("Jonah" finds Jonas) with `levenshtein_less_equal`, where a trigram match also took "Marius"
for Maria (lessons/search/filters.py)."""

from django.contrib.postgres.operations import CreateExtension
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("lessons", "0015_people_names_in_nfc")]

    operations = [CreateExtension("fuzzystrmatch")]
