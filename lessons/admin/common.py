"""Shared pieces of the admin classes."""

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.forms import SimpleArrayField


def changed_values(form) -> dict:
    return {name: form.cleaned_data[name] for name in form.changed_data if name in form.cleaned_data}


class CommaSeparatedField(SimpleArrayField):
    """A list typed as "react, vue,": blank items (a trailing or doubled comma) are dropped, where
    the stock field refused the form with "Item 3 in the array did not validate". Each item is checked
    against the model's rule for a term here, in the form: left to the model's own validation, the
    error read "Item 2 in the array did not validate:" with the reason missing."""

    def to_python(self, value):
        if isinstance(value, str):
            value = self.delimiter.join(item for item in value.split(self.delimiter) if item.strip())
        return super().to_python(value)


class ReadableInputsMixin:
    """Inputs sized for what curators type into them. A lesson's title is a sentence (up to 300
    characters) and the stock 20em input showed its first forty; list fields (tags, tech stacks,
    people, ...) are typed comma-separated, which the stock form did not say."""

    wide_fields: tuple[str, ...] = ()

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        is_list = isinstance(db_field, ArrayField)
        if is_list:
            kwargs.setdefault("form_class", CommaSeparatedField)
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is None:
            return field
        if is_list or db_field.name in self.wide_fields:
            field.widget.attrs["class"] = "vLargeTextField"
        if is_list:
            field.base_field.validators.extend(db_field.base_field.validators)
            separated = "Comma-separated."
            field.help_text = f"{separated} {field.help_text}" if field.help_text else separated
        return field


class WideChangeListMixin:
    """The lesson and memory lists without the app sidebar: at 1280 px it left their tables 631 px
    for 12 columns, a title 130 px wide and half the columns scrolled out of sight. The index and
    the breadcrumbs still lead everywhere it did (the playground does the same)."""

    def changelist_view(self, request, extra_context=None):
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, extra_context=context)
