"""Team slugs are lowercase: `--team Acme` and `--team acme` could name two teams. A validator
only (no change to the table); a team created before keeps its slug."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('lessons', '0013_storable_moments_and_ascii_terms'),
    ]

    operations = [
        migrations.AlterField(
            model_name='team',
            name='slug',
            field=models.SlugField(max_length=100, unique=True, validators=[django.core.validators.RegexValidator('^[^A-Z]*\\Z', 'Use lowercase letters (acme, not Acme): a team is named in lowercase.')]),
        ),
    ]
