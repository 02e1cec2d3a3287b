"""Shared pieces of the admin classes."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import model_format_dict, unquote
from django.contrib.admin.views.main import ChangeList
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.forms import SimpleArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import DataError, connection, models, transaction
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html

from lessons.admin.curation import TeamField, team_label
from lessons.models import Team
from lessons.selectors.admin_search import admin_teams
from lessons.services.common import changed_since_opened
from lessons.text import clean_text


def confirmed_selection_max() -> int:
    """A confirmation page posts one field per row back, and a few of its own (settings)."""
    return settings.DATA_UPLOAD_MAX_NUMBER_FIELDS - 100


def selection_too_large(model_admin, request, queryset) -> bool:
    """Say so, and stop before the confirmation page, when a selection is more than one can confirm."""
    selected, most = queryset.count(), confirmed_selection_max()
    if selected <= most:
        return False
    model_admin.message_user(
        request,
        f"{selected:,} rows are selected; one action takes at most {most:,}. "
        "Narrow the list with a filter or a search, and run it again.",
        messages.ERROR,
    )
    return True


class CheckedChangeList(ChangeList):
    """A list whose query string names a value the database cannot read is Django's "incorrect
    lookup" page (`?e=1`), as a filter Django itself cannot build is. Django checks only while it
    builds the filter; these values fail later, when the list is counted: an array typed as text
    ("?tags__contains=x", "?people__contains={": PostgreSQL's "malformed array literal") and a
    date part past Python's dates ("?updated_at__year=99999", whose bounds Django computes as
    datetimes) were 500s. Caught where the count runs, so any array field, any date part, any
    such value is covered; a savepoint keeps the request's transaction usable after PostgreSQL
    refused it.

    "(N total)" counts `default_rows`, what the list shows with no filter chosen (the link leads
    there): a list whose filters hide rows by default (evaluation teams, earlier versions) said
    "799 results (6042 total)" and the link led back to the same 799."""

    def default_rows(self, queryset):
        return queryset

    def get_results(self, request):
        # the full count is the only use of root_queryset in get_results; the filters' own counts,
        # made later from root_queryset, still count every row
        root, self.root_queryset = self.root_queryset, self.default_rows(self.root_queryset)
        try:
            with transaction.atomic():
                super().get_results(request)
        except (DataError, ValueError, OverflowError) as error:
            # Counting and paging only turn the filter into SQL and run it: an error here is the
            # query string's value, not the page's (which renders later).
            raise IncorrectLookupParameters(error) from error
        finally:
            self.root_queryset = root


class CheckedSelectionModelAdmin(admin.ModelAdmin):
    """A list action whose posted selection holds something that is not an id ("abc", from a
    crafted or truncated form) is answered with a message and the list again; Django's own
    `response_action` filtered on it and answered 500.

    The rows ticked are the action's by their ids, whatever the list's filters and search say of
    them now: a confirmation posts back to the list's URL, and Django took the selection from the
    filtered list, so on `?status__exact=proposed` a proposal rejected meanwhile dropped out and the
    accept said it "no longer exists (merged or deleted)". "Select all N" (`select_across`) is the
    list's rows, filters and all, as in Django."""

    def response_action(self, request, queryset):
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        try:
            for value in selected:
                pk = self.model._meta.pk.to_python(value)
                # int() reads "٣" (an Arabic-Indic 3) as 3: an id is ASCII digits, within bigint
                if isinstance(pk, int) and (not value.strip().lstrip("-").isascii() or not -(2**63) <= pk < 2**63):
                    raise ValidationError(value)
        except ValidationError:
            return self._selection_refused(request, "The selection holds something that is not a row's id")
        select_across = request.POST.get("select_across") == "1"
        if selected and not select_across:
            queryset = self.get_queryset(request)  # every row this admin holds; Django narrows it to the ids
            if not queryset.filter(pk__in=selected).exists():
                # ids of rows deleted or merged meanwhile: "Done" over nothing was untrue
                return self._selection_refused(request, "None of the selected rows exists any more")
        return super().response_action(request, queryset)

    def get_changelist(self, request, **kwargs):
        return CheckedChangeList

    def get_changelist_instance(self, request):
        # A list's query string reaches the database as it is, and PostgreSQL's text holds no
        # NUL: "?title=%00" was a 500 while the page rendered. Django's own answer to a bad
        # filter instead: the list again with "?e=1".
        if any("\x00" in name or "\x00" in value for name, values in request.GET.lists() for value in values):
            raise IncorrectLookupParameters("a NUL character in the query string")
        return super().get_changelist_instance(request)

    def lookup_allowed(self, lookup, value, request=None):
        # A regular expression typed into a list URL is PostgreSQL's to compile ("?title__regex=("
        # was a 500); no filter of these lists offers one, so none is taken (Django: 400).
        if lookup.rsplit("__", 1)[-1] in ("regex", "iregex"):
            return False
        return super().lookup_allowed(lookup, value, request)

    def changelist_view(self, request, extra_context=None):
        unavailable = self._unavailable_action(request)
        if unavailable is not None:
            self.message_user(request, f"{unavailable} Nothing was changed.", messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())
        return super().changelist_view(request, extra_context)

    def _unavailable_action(self, request) -> str | None:
        """Why the posted list action is not this curator's, or None when it is (or none is posted).
        Django dropped an action the curator lacks the permission for and answered the list again,
        without a word: a view-only curator's "reject" looked as if it had been ignored."""
        posted = request.POST.getlist("action") if request.method == "POST" and "_save" not in request.POST else []
        if not posted or not self.has_view_or_change_permission(request):
            return None  # nothing asked, or Django's own "permission denied"
        try:
            name = posted[int(request.POST.get("index", 0))]  # which of the list's action bars, as Django reads it
        except (ValueError, IndexError):
            name = posted[0]
        if not name or name in self.get_actions(request):
            return None
        known = name in (self.actions or ()) or name in dict(self.admin_site.actions)
        if not known:
            return f"There is no action “{name}” on this list."
        func, _, description = self.get_action(name)
        what = str(description) % model_format_dict(self.opts)
        lacking = [permission for permission in getattr(func, "allowed_permissions", ())
                   if not getattr(self, f"has_{permission}_permission")(request)]
        if not lacking:  # e.g. delete on the earlier versions of memories, which go with their memory only
            return f"“{what}” is not offered on this list."
        return (f"“{what}” is not available to you: it needs the {' and '.join(lacking)} permission on "
                f"{self.opts.verbose_name_plural}.")

    def _selection_refused(self, request, reason: str):
        self.message_user(request, f"{reason}; nothing was done. Select the rows again.", messages.ERROR)
        return HttpResponseRedirect(request.get_full_path())


def changed_values(form) -> dict:
    """The model fields the curator changed (not the form's own, such as `opened_at`)."""
    model_fields = {field.name for field in form._meta.model._meta.get_fields()}
    return {name: form.cleaned_data[name] for name in form.changed_data
            if name in form.cleaned_data and name in model_fields}


def term_normalisation_notice(*, form, saved, field_names: tuple[str, ...]) -> str | None:
    """What the save stored otherwise than typed among the terms (a category, tags...: the services
    keep them in lower case, each once): "Not Lower" was stored as "not lower" without a word."""
    def shown(value) -> str:
        return ", ".join(value) if isinstance(value, list) else str(value)

    differences = [
        f"{str(form.fields[name].label).lower()} “{shown(form.cleaned_data[name])}”"
        f" as “{shown(getattr(saved, name))}”"
        for name in field_names
        if name in form.changed_data and name in form.cleaned_data
        and form.cleaned_data[name] != getattr(saved, name)
    ]
    if not differences:
        return None
    return (f"Saved {'; '.join(differences)}: terms are stored in lower case and each once, so one typed two "
            "ways stays one term.")


class CommaSeparatedField(SimpleArrayField):
    """A list typed as "react, vue,": blank items (a trailing or doubled comma) are dropped, where
    the stock field refused the form with "Item 3 in the array did not validate". Each item is checked
    against the model's rule for a term here, in the form: left to the model's own validation, the
    error read "Item 2 in the array did not validate:" with the reason missing."""

    def to_python(self, value):
        if isinstance(value, str):
            value = value.replace("\r\n", "\n")  # a textarea's lines arrive as CRLF
            value = self.delimiter.join(item for item in value.split(self.delimiter) if item.strip())
        return super().to_python(value)


class StoredMaxLengthValidator(MaxLengthValidator):
    """A free text's length as stored (clean_text: NFC, without invisible characters), as the API counts it
    (lessons.api.schemas.stored_text): a title of "e" and a combining accent 200 times is 200 characters
    once stored, and the admin refused it as 400 over 300 while the API stored it."""

    def clean(self, x):
        return len(clean_text(x))


def _is_free_text(name: str, field) -> bool:
    # an external id is matched against its source as it was given, not as a text is stored
    return type(field) is forms.CharField and name != "external_id"


class ServiceTextForm(forms.ModelForm):
    """Texts as the services will store them (lessons.text.clean_text) before the model checks
    them: a title of only invisible characters passed the form, the service then found it blank,
    and the curator got a 500. Now it is refused on its field, like a title of spaces.

    A save over a row that changed since the page was opened is refused (`opened_at`, the row's
    `updated_at` then): Django compares a posted form with the row as it is at the save, so a form
    opened before another curator rejected the proposal wrote "proposed" back, without a word."""

    opened_at = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk and getattr(self.instance, "updated_at", None):
            self.fields["opened_at"].initial = self.instance.updated_at.isoformat()
        for name, field in self.fields.items():
            if _is_free_text(name, field):
                field.validators = [StoredMaxLengthValidator(rule.limit_value) if type(rule) is MaxLengthValidator
                                    else rule for rule in field.validators]

    def clean(self):
        cleaned = super().clean()
        opened = cleaned.get("opened_at")
        if opened and self.instance.pk:
            stored = self._stored_row_locked()
            if stored is None:
                raise ValidationError(
                    f"This {self.instance._meta.verbose_name} was deleted or merged away by someone else after "
                    "you opened this page, and saving would bring it back.", code="deleted_since_opened",
                )
            stale = changed_since_opened(
                row=stored, opened_at=parse_datetime(opened), would="saving would undo that",
                then="Open it again to see the change, then make your edit.",
            )
            if stale is not None:
                raise stale
        for name, field in self.fields.items():
            value = cleaned.get(name)
            if _is_free_text(name, field) and isinstance(value, str):
                cleaned[name] = clean_text(value)
                if field.required and not cleaned[name]:
                    self.add_error(name, field.error_messages["required"])
        return cleaned

    def _stored_row_locked(self):
        """The row as stored, locked until the save ends when the admin's POST runs in its
        transaction (it does): compared with the row the page read before, a change made between
        this check and the save was still lost. None when it is gone."""
        rows = type(self.instance)._default_manager
        if connection.in_atomic_block:
            rows = rows.select_for_update()
        return rows.filter(pk=self.instance.pk).only("updated_at").first()


class ReadableInputsMixin:
    """Inputs sized for what curators type into them. A lesson's title is a sentence (up to 300
    characters) and the stock 20em input showed its first forty; list fields (tags, tech stacks,
    people, ...) are typed comma-separated, which the stock form did not say."""

    form = ServiceTextForm
    wide_fields: tuple[str, ...] = ()
    # lists whose items may hold a comma ("Smith, John"), typed one per line: split at commas, a
    # name with one came back as two people on the next save
    line_separated_fields: tuple[str, ...] = ()

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or not self.has_change_permission(request, obj):
            return fieldsets  # nothing to save (a read-only page cannot show a form-only field)
        (title, options), *rest = fieldsets
        return [(title, {**options, "fields": (*options["fields"], "opened_at")}), *rest]

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        is_list = isinstance(db_field, ArrayField)
        by_line = db_field.name in self.line_separated_fields
        if is_list:
            kwargs.setdefault("form_class", CommaSeparatedField)
        if by_line:
            kwargs.update(delimiter="\n", widget=forms.Textarea(attrs={"rows": 3}))
        if isinstance(db_field, (models.IntegerField, models.FloatField)):
            kwargs = {**_model_bounds(db_field), **kwargs}
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is None:
            return field
        if is_list or db_field.name in self.wide_fields:
            field.widget.attrs["class"] = "vLargeTextField"
        if isinstance(db_field, models.DateTimeField) and hasattr(field.widget, "widgets"):
            # the stock pair of inputs is labelled only by plain "Date:" and "Time:" text
            for widget, part in zip(field.widget.widgets, ("date", "time")):
                widget.attrs["aria-label"] = f"{db_field.verbose_name.capitalize()}: {part}"
        if is_list:
            # the model's rules for an item that the item's form field lacks (its length it has)
            own = field.base_field.validators
            field.base_field.validators.extend(rule for rule in db_field.base_field.validators if rule not in own)
            separated = "One per line." if by_line else "Comma-separated."
            field.help_text = f"{separated} {field.help_text}" if field.help_text else separated
        return field


class WideChangeListMixin:
    """The lesson and memory lists without the app sidebar: at 1280 px it left their tables 631 px
    for 12 columns, a title 130 px wide and half the columns scrolled out of sight. The index and
    the breadcrumbs still lead everywhere it did (the playground does the same)."""

    def changelist_view(self, request, extra_context=None):
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, extra_context=context)


def _model_bounds(db_field) -> dict:
    """The tightest min_value / max_value the model's validators set, for the form field: a
    frequency of -1 was refused as "at least 0" (the column's type) while 0 was then refused as
    "at least 1" (the model's rule), and the input offered 0."""
    validators = db_field.validators
    lows = [v.limit_value for v in validators if isinstance(v, MinValueValidator) and not callable(v.limit_value)]
    highs = [v.limit_value for v in validators if isinstance(v, MaxValueValidator) and not callable(v.limit_value)]
    bounds = {}
    if lows:
        bounds["min_value"] = max(lows)
    if highs:
        bounds["max_value"] = min(highs)
    return bounds


class TeamLabelsMixin:
    """Teams named as the curation pages name them, "Acme (acme)" (`team_label`), in the add form's
    menu, the list's column (`team_label` in list_display) and its filter (`TeamFilter`). A team's
    name need not be unique: two teams "demo" were two identical entries in the API key form, and
    picking the wrong one gave an agent a key to another team's data. Team.__str__ stays the name.

    The add form's menu offers the curated teams only (`admin_teams`), as the lists do: evaluation
    teams (`eval-*`) hold benchmark corpora, and the lesson and memory forms offered "Eval mini
    (eval-mini)". A row of one is still opened and saved: its team is read-only there.

    A change page's read-only team is shown by `TeamShown` (a link only for who may open the team),
    wherever it is read-only: the admin names it so (`readonly_fields`), the row is never edited
    (API keys, duplicate marks) or the curator may only view it. Django's own link answered 403."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "team":
            kwargs.setdefault("form_class", TeamField)
            kwargs.setdefault("queryset", admin_teams())
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and ("team" in fields or not self.has_change_permission(request, obj)):
            return with_team_shown(fields, request=request, admin_site=self.admin_site)
        return fields

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        shown = TeamShown(request=request, admin_site=self.admin_site)
        if obj is None or shown not in self.get_readonly_fields(request, obj):
            return fieldsets
        # the team once, where "team" was: a page without declared fields lists "team" and TeamShown both
        seen_team = False
        shown_fieldsets = []
        for title, options in fieldsets:
            names = []
            for name in options["fields"]:
                if name == "team" or name == shown:
                    if seen_team:
                        continue
                    name, seen_team = shown, True
                names.append(name)
            shown_fieldsets.append((title, {**options, "fields": tuple(names)}))
        return shown_fieldsets

    @admin.display(description="team", ordering="team__slug")
    def team_label(self, obj):
        return team_label(obj.team)


class TeamFilter(admin.RelatedFieldListFilter):
    """Django's team filter (same `team__id__exact`), its teams named as the column names them."""

    def field_choices(self, field, request, model_admin):
        return [(team.pk, team_label(team)) for team in Team.objects.order_by("slug")]


class TeamChosenOnceMixin(TeamLabelsMixin):
    """A row's team is chosen when it is added and shown read-only after: the services do not move
    rows between teams (their searches, feedback and duplicates belong to the team), and a changed
    team reached them as an unknown field, a 500. It is shown by `TeamShown` (`TeamLabelsMixin`), not
    as Django shows a read-only foreign key."""

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if obj is None else with_team_shown(fields, request=request, admin_site=self.admin_site)


def with_team_shown(fields: tuple, *, request, admin_site) -> tuple:
    """Read-only `fields` with the team shown by `TeamShown` once ("team" is kept: it keeps the team
    out of the form Django builds to list a page's fields)."""
    shown = TeamShown(request=request, admin_site=admin_site)
    return fields if shown in fields else (*fields, shown)


class TeamShown:
    """A row's team on its change page: a link to the team's page only for a curator who may open
    it (the team admin's `has_view_permission`, which change permission grants too), the team as
    text otherwise. Django links a read-only foreign key whatever the curator may do, and a
    view-only curator's link to the team answered 403.

    Django takes a callable as a read-only field, given the row; this one also holds the request.
    The fieldsets and the read-only fields each get one, and Django matches them by equality."""

    def __init__(self, *, request, admin_site):
        self.request, self.admin_site = request, admin_site
        self.__name__ = "team"  # the field's row is named after it: class "field-team", the team's help text
        self.short_description = "team"

    def __call__(self, obj):
        team = obj.team
        if not self.admin_site.get_model_admin(Team).has_view_permission(self.request, team):
            return team_label(team)
        url = reverse("admin:lessons_team_change", args=[team.pk], current_app=self.admin_site.name)
        return format_html('<a href="{}">{}</a>', url, team_label(team))

    def __eq__(self, other):
        return isinstance(other, TeamShown) and other.request is self.request

    def __hash__(self):
        return id(self.request)


class MergedAwayMixin:
    """A row merged into another is gone, but its merge record says where: its change, history and
    delete pages (and a save racing the merge) say "Lesson #105 was merged into #1 ..." and open
    the kept row, where Django said "Lesson with ID “105” doesn't exist. Perhaps it was deleted?"
    and went to the index. A row deleted (or never there) keeps Django's message."""

    def merged_into(self, *, row_id: int):
        """(the row that holds it now, when it was merged), or None; each admin says how."""
        raise NotImplementedError

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except self.model.DoesNotExist:
            if object_id is None:
                raise
            # merged (or deleted) while the save waited for the row's lock
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)

    def _get_obj_does_not_exist_redirect(self, request, opts, object_id):
        try:
            found = self.merged_into(row_id=int(unquote(object_id)))
        except ValueError:
            found = None
        if found is None:
            return super()._get_obj_does_not_exist_redirect(request, opts, object_id)
        kept, merged_at = found
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[kept.pk])
        # named by its id: the page that opens is the kept row's, where "this lesson" would be that one
        posted = request.method == "POST"
        unsaved = " Your changes were not saved; make them here if they still apply." if posted else ""
        self.message_user(
            request,
            format_html(
                '{} #{} was merged into <a href="{}">#{} “{}”</a> on {} and no longer exists on its own; '
                "this is the {} it was merged into.{}",
                opts.verbose_name.capitalize(), unquote(object_id), url, kept.pk, kept,
                timezone.localtime(merged_at).strftime("%Y-%m-%d %H:%M"), opts.verbose_name, unsaved,
            ),
            messages.WARNING,
        )
        return HttpResponseRedirect(url)
