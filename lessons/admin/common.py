"""Shared pieces of the admin classes."""


def changed_values(form) -> dict:
    return {name: form.cleaned_data[name] for name in form.changed_data if name in form.cleaned_data}
