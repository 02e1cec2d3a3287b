"""unaccent (a contrib extension, like pg_trgm and fuzzystrmatch): a person search finds a name
written with or without its accents ("Zoe" finds Zoë, "Jose" José), in `people` and in the text
(lessons/search/filters.py)."""

from django.contrib.postgres.operations import UnaccentExtension
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("lessons", "0021_long_texts_bounded")]

    operations = [UnaccentExtension()]
