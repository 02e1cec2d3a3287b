"""The search playground, `/admin/lessons/search/`: one query under two settings side by side.

Everything is in the query string (`team`, `kind`, `q`, `mode`, `context`, `fusion`,
`w_semantic` / `w_keyword` / `w_quality`, the filters (`embedding` as the lists' embedding filter),
and `b_mode`, `b_fusion`, `b_w_*` for the setting to compare with), so a curator can share the link.
The form validates it (bad values are shown next to their field, never a 500);
`lessons.selectors.admin_search.playground_compare` runs the engine's `search()`, the same call the
API makes, with explanations.
"""

import pydantic
from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from lessons.api.errors import pydantic_validation_errors
from lessons.api.schemas import Term, Terms
from lessons.models import EmbeddingStatus, LessonStatus
from lessons.search import FUSIONS, KINDS, MAX_LIMIT, MODES, SearchFilters, SearchRequest
from lessons.search.kinds import SEARCH_KINDS
from lessons.search.types import MAX_CONTEXT_CHARS, MAX_QUERY_CHARS
from lessons.selectors.admin_search import PlaygroundSetting, admin_teams, playground_compare

PARTS = ("semantic", "keyword", "quality")
MODE_WITHOUT_PART = {"text": "semantic", "semantic": "keyword"}  # the part a mode does not score with
ENGINE_FIELDS = {"query": "q", "weights": "w_semantic", "tech_stack": "tech_stack"}  # engine's name -> form's


def _terms(value: str) -> tuple[str, ...]:
    return tuple(term.strip().lower() for term in (value or "").split(",") if term.strip())


class TermsField(forms.CharField):
    """Comma-separated terms (`postgresql, nextjs`), or one term with `many=False`, checked as
    `POST /api/v1/search` checks the field it stands for (`api_field`, with the API's own types
    from lessons.api.schemas) and refused in the API's words, naming that field ("filters.tags.0:
    Use ASCII letters..."): `tags=bad tag!` and 60 tech stacks answered "No results." here while
    the API answered 422."""

    def __init__(self, *, api_field: str, many: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.api_field, self.many = api_field, many
        # keyed by the API's field name, so an error's location reads as the API's ("filters.tags.0")
        self.api_check = pydantic.TypeAdapter(dict[str, Terms if many else Term])

    def clean(self, value):
        value = super().clean(value)
        value = _terms(value) if self.many else value
        if value:
            try:
                self.api_check.validate_python({self.api_field: value})
            except pydantic.ValidationError as error:
                raise forms.ValidationError(pydantic_validation_errors(error)["detail"]) from None
        return value


def _weight_field(label, *, setting):
    # Three inputs share one visible caption, so each names itself: a screen reader read A's and
    # B's alike ("semantic weight").
    name = f"Setting {setting}: {label} weight"
    return forms.FloatField(
        label=name,
        required=False,
        min_value=0.0,
        max_value=1.0,
        widget=forms.NumberInput(attrs={"step": "0.05", "title": f"{name} (blank: the default)", "aria-label": name}),
    )


class PlaygroundForm(forms.Form):
    team = forms.ChoiceField()
    kind = forms.ChoiceField(choices=[(kind, kind) for kind in KINDS], required=False)
    q = forms.CharField(label="Query", required=False, max_length=MAX_QUERY_CHARS, strip=True)
    context = forms.CharField(
        required=False,
        max_length=MAX_CONTEXT_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The caller's situation (a file, a conversation): searched as a second query.",
    )
    limit = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_LIMIT, widget=forms.NumberInput(attrs={"placeholder": "10"})
    )
    # Filters (hard: a row that does not match is never a candidate).
    status = forms.MultipleChoiceField(
        label="Statuses", choices=LessonStatus.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    category = TermsField(label="Categories", required=False, api_field="filters.categories")
    tags = TermsField(required=False, api_field="filters.tags")
    tech_stacks = TermsField(label="Tech stacks (filter)", required=False, api_field="filters.tech_stacks")
    min_importance = forms.IntegerField(label="Min. importance", required=False, min_value=1, max_value=10)
    max_importance = forms.IntegerField(label="Max. importance", required=False, min_value=1, max_value=10)
    # the lists' embedding filter, so "Why this order?" from a filtered list ranks the same rows
    embedding = forms.MultipleChoiceField(
        label="Embeddings", choices=EmbeddingStatus.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    include_versions = forms.BooleanField(label="Earlier versions too", required=False)
    only_versions = forms.BooleanField(label="Earlier versions only", required=False)
    # Who is asking (scored, not filtered).
    tech_stack = TermsField(label="Caller's tech stack", required=False, api_field="tech_stack")
    project_type = TermsField(label="Caller's project type", required=False, api_field="project_type", many=False)
    # Setting A.
    mode = forms.ChoiceField(choices=[(mode, mode) for mode in MODES], required=False)
    fusion = forms.ChoiceField(choices=[(fusion, fusion) for fusion in FUSIONS], required=False)
    w_semantic = _weight_field("semantic", setting="A")
    w_keyword = _weight_field("keyword", setting="A")
    w_quality = _weight_field("quality", setting="A")
    # Setting B: compared when b_mode is chosen.
    b_mode = forms.ChoiceField(
        label="Compare with", choices=[("", "nothing")] + [(mode, mode) for mode in MODES], required=False
    )
    b_fusion = forms.ChoiceField(choices=[(fusion, fusion) for fusion in FUSIONS], required=False)
    b_w_semantic = _weight_field("semantic", setting="B")
    b_w_keyword = _weight_field("keyword", setting="B")
    b_w_quality = _weight_field("quality", setting="B")

    DEFAULTS = {"kind": "lessons", "mode": "hybrid", "fusion": "weighted", "b_fusion": "weighted", "limit": 10}

    def __init__(self, *args, teams, kinds=KINDS, **kwargs):
        super().__init__(*args, **kwargs)
        self.teams = {team.slug: team for team in teams}
        self.fields["team"].choices = [(slug, slug) for slug in self.teams]
        if self.is_bound and self.data.get("team") not in self.teams:
            # The list showed the first team as chosen beside "nope is not one of the available
            # choices", and Search then ran on that team: nothing is chosen until the curator picks.
            self.fields["team"].choices = [("", "— choose a team —"), *self.fields["team"].choices]
        self.fields["kind"].choices = [(kind, kind) for kind in kinds]  # those this curator may view
        self.defaults = {**self.DEFAULTS, "kind": kinds[0]}
        for name in PARTS:
            default = settings.SEARCH_WEIGHTS.get(name, 0.0)
            for prefix in ("w_", "b_w_"):
                self.fields[f"{prefix}{name}"].widget.attrs["placeholder"] = f"{default:g}"

    def clean(self):
        cleaned = super().clean()
        for name, default in self.defaults.items():
            if cleaned.get(name) in (None, ""):
                cleaned[name] = default
        for prefix, mode in (("w_", cleaned.get("mode")), ("b_w_", cleaned.get("b_mode") or cleaned.get("mode"))):
            weights = {name: cleaned.get(f"{prefix}{name}") for name in PARTS}
            given = {name: value for name, value in weights.items() if value is not None}
            applied = {**settings.SEARCH_WEIGHTS, **given}
            # the parts this column's mode scores with: text has no semantic part, semantic no keyword
            used = [name for name in PARTS if name != MODE_WITHOUT_PART.get(mode)]
            if given and sum(applied.values()) <= 0:
                self.add_error(f"{prefix}semantic", "at least one weight must be above 0")
            elif given and sum(applied[name] for name in used) <= 0:
                self.add_error(f"{prefix}{used[0]}", f"{mode} mode scores with the {' and '.join(used)} weights; "
                                                     "at least one of them must be above 0")
            cleaned[f"{prefix}weights"] = given or None
        return cleaned

    def search_request(self) -> SearchRequest:
        data = self.cleaned_data
        lessons = data["kind"] == "lessons"
        filters = SearchFilters(
            statuses=tuple(data["status"]) or ((LessonStatus.CONFIRMED,) if lessons else ()),
            categories=data["category"],
            tags=data["tags"],
            tech_stacks=data["tech_stacks"],
            min_importance=data["min_importance"],
            max_importance=data["max_importance"],
            include_versions=data["include_versions"] or data["only_versions"],
            only_versions=data["only_versions"],
            embedding_states=tuple(data["embedding"]),
        )
        return SearchRequest(
            team=self.teams[data["team"]],
            query=data["q"],
            kind=data["kind"],
            limit=data["limit"],
            context=data["context"],
            filters=filters,
            tech_stack=data["tech_stack"],
            project_type=data["project_type"].strip().lower() or None,
        )

    def settings_to_compare(self) -> list[PlaygroundSetting]:
        data = self.cleaned_data
        compared = [PlaygroundSetting(mode=data["mode"], fusion=data["fusion"], weights=data["w_weights"])]
        if data["b_mode"]:
            compared.append(PlaygroundSetting(mode=data["b_mode"], fusion=data["b_fusion"], weights=data["b_w_weights"]))
        return compared


def _initial_team(teams) -> str | None:
    slugs = [team.slug for team in teams]
    return "demo" if "demo" in slugs else (slugs[0] if slugs else None)


def viewable_kinds(request) -> list[str]:
    """The kinds this curator may read in the lists; the playground shows the same texts, so it
    asks the same question (view or change permission on the model)."""
    return [
        kind for kind in KINDS
        if admin.site.get_model_admin(SEARCH_KINDS[kind].model).has_view_or_change_permission(request)
    ]


def search_playground(request):
    kinds = viewable_kinds(request)
    if not kinds:
        raise PermissionDenied
    teams = list(admin_teams(include_evaluation=True))
    initial = {"team": _initial_team(teams), "kind": kinds[0], "mode": "hybrid", "b_mode": "text", "limit": 10}
    if request.GET:
        data = request.GET.copy()
        data.setdefault("team", initial["team"] or "")
        form = PlaygroundForm(data, teams=teams, kinds=kinds)
    else:
        form = PlaygroundForm(initial=initial, teams=teams, kinds=kinds)
    runs = []
    searched = form.is_bound and form.is_valid()
    if searched:
        runs = playground_compare(request=form.search_request(), settings=form.settings_to_compare())
        for run in runs:
            if run.error is not None:
                field = ENGINE_FIELDS.get(run.error.field, run.error.field)
                form.add_error(field if field in form.fields else None, f"{run.error.field}: {run.error.message}")
    context = {
        **admin.site.each_context(request),
        "title": "Search playground",
        "is_nav_sidebar_enabled": False,  # the two result columns need the width
        "subtitle": None,
        "form": form,
        "runs": runs,
        "searched": searched,
        "kind": form.cleaned_data.get("kind") if searched else kinds[0],
        "part_names": PARTS,
    }
    return TemplateResponse(request, "admin/lessons/search_playground.html", context)
