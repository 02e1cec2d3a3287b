"""The search playground, `/admin/lessons/search/`: one query under two settings side by side.

Everything is in the query string (`team`, `kind`, `q`, `mode`, `context`, `fusion`,
`w_semantic` / `w_keyword` / `w_quality`, the filters (`embedding` as the lists' embedding filter),
and `b_mode`, `b_fusion`, `b_w_*` for the setting to compare with), so a curator can share the link.
The form validates it (bad values are shown next to their field, never a 500);
`lessons.selectors.admin_search.playground_compare` runs the engine's `search()`, the same call the
API makes, with explanations.

The team menu names teams "Name (slug)" and leaves evaluation teams out unless the link names one.
A blank weight box shows the default its column's mode uses for this query (`mode_default_weights`),
which the column's header then reports, and a blank box beside a filled one stands for that value.
"""

import pydantic
from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from lessons.admin.curation import team_label
from lessons.api.errors import pydantic_validation_errors
from lessons.api.schemas import Term, Terms
from lessons.models import EmbeddingStatus, LessonStatus
from lessons.search import FUSIONS, KINDS, MAX_LIMIT, MODES, SearchFilters, SearchRequest, scoring
from lessons.search.engine import query_default_weights
from lessons.search.kinds import SEARCH_KINDS
from lessons.search.types import MAX_CONTEXT_CHARS, MAX_QUERY_CHARS
from lessons.selectors.admin_search import (
    EVALUATION_TEAM_PREFIX, PlaygroundSetting, admin_teams, evaluation_team_q, playground_compare,
)
from lessons.text import clean_text

PARTS = ("semantic", "keyword", "quality")
MODE_WITHOUT_PART = {"text": "semantic", "semantic": "keyword"}  # the part a mode does not score with
ENGINE_FIELDS = {"query": "q", "weights": "w_semantic", "tech_stack": "tech_stack"}  # engine's name -> form's


def mode_default_weights(*, mode: str, kind: str, query: str, caller_metadata: bool) -> dict[str, float]:
    """The weights a column in `mode` searches `query` with when its boxes are blank, as its header
    then reports them: the engine's defaults for the query's length (engine.query_default_weights),
    renormalised over the parts the mode scores (scoring.active_weights), as engine.search does. A
    text column's boxes showed hybrid's 0.6 · 0.2 · 0.2 above a header saying keyword 0.50 · quality 0.50."""
    query = " ".join(clean_text(query or "").split())
    defaults = query_default_weights(query=query, kind=kind)
    return scoring.active_weights(defaults, semantic=mode != "text", keyword=mode != "semantic" or caller_metadata)


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
        # "Name (slug)" as every team picker names them; an evaluation team is offered only when the
        # link names it (a list filtered to one links here), and says what it is, as the lists' filter
        self.fields["team"].choices = [
            (slug, f"{team_label(team)} (evaluation)" if _is_evaluation(team) else team_label(team))
            for slug, team in self.teams.items()
        ]
        if self.is_bound and self.data.get("team") not in self.teams:
            # The list showed the first team as chosen beside "nope is not one of the available
            # choices", and Search then ran on that team: nothing is chosen until the curator picks.
            self.fields["team"].choices = [("", "— choose a team —"), *self.fields["team"].choices]
        self.fields["kind"].choices = [(kind, kind) for kind in kinds]  # those this curator may view
        self.defaults = {**self.DEFAULTS, "kind": kinds[0]}
        self.kinds = kinds
        self.weights_by_mode = self._weights_by_mode()
        for prefix, mode in (("w_", self._shown("mode")), ("b_w_", self._shown("b_mode") or self._shown("mode"))):
            self._show_default_weights(prefix=prefix, mode=mode)

    def _shown(self, name: str) -> str:
        """A mode as the form shows it chosen: `mode`'s default, or no `b_mode`, for a bad value."""
        value = (self.data if self.is_bound else self.initial).get(name)
        return value if value in MODES else ("" if name == "b_mode" else self.DEFAULTS["mode"])

    def _weights_by_mode(self) -> dict[str, dict[str, float]]:
        """Each mode's default weights for the query, kind and caller the form holds: the boxes'
        placeholders, what a blank box beside a filled one stands for (clean), and what the page's
        script shows when the curator picks another mode. Read before validation, as the fields
        will clean them (a bad value is refused beside its field, and nothing is searched)."""
        source = self.data if self.is_bound else self.initial
        kind = source.get("kind") if source.get("kind") in self.kinds else self.kinds[0]
        caller = SEARCH_KINDS[kind].caller_metadata and bool(
            _terms(str(source.get("tech_stack") or "")) or str(source.get("project_type") or "").strip())
        return {mode: mode_default_weights(mode=mode, kind=kind, query=str(source.get("q") or ""),
                                           caller_metadata=caller) for mode in MODES}

    def _show_default_weights(self, *, prefix: str, mode: str) -> None:
        defaults = self.weights_by_mode[mode]
        for name in PARTS:
            attrs = self.fields[f"{prefix}{name}"].widget.attrs
            attrs["placeholder"] = f"{defaults[name]:.2f}" if name in defaults else "–"
            attrs["data-part"] = name

    def clean(self):
        cleaned = super().clean()
        for name, default in self.defaults.items():
            if cleaned.get(name) in (None, ""):
                cleaned[name] = default
        for prefix, mode in (("w_", cleaned.get("mode")), ("b_w_", cleaned.get("b_mode") or cleaned.get("mode"))):
            weights = {name: cleaned.get(f"{prefix}{name}") for name in PARTS}
            given = {name: value for name, value in weights.items() if value is not None}
            # a blank box beside a filled one stands for the default its placeholder shows
            sent = {**self.weights_by_mode.get(mode, {}), **given}
            applied = {**settings.SEARCH_WEIGHTS, **sent}  # as the engine completes weights (validation.py)
            # the parts this column's mode scores with: text has no semantic part, semantic no keyword
            used = [name for name in PARTS if name != MODE_WITHOUT_PART.get(mode)]
            if given and sum(applied.values()) <= 0:
                self.add_error(f"{prefix}semantic", "at least one weight must be above 0")
            elif given and sum(applied[name] for name in used) <= 0:
                self.add_error(f"{prefix}{used[0]}", f"{mode} mode scores with the {' and '.join(used)} weights; "
                                                     "at least one of them must be above 0")
            cleaned[f"{prefix}weights"] = sent if given else None
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


def _is_evaluation(team) -> bool:
    return team.slug.startswith(EVALUATION_TEAM_PREFIX)


def playground_teams(*, named: str | None) -> list:
    """The curated teams (admin_teams leaves evaluation teams out), and the evaluation team the link
    names: the lists link here with their team, an evaluation one when their filter chose it."""
    teams = list(admin_teams())
    if named and not any(team.slug == named for team in teams):
        teams += admin_teams(include_evaluation=True).filter(evaluation_team_q(prefix=""), slug=named)
    return teams


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
    teams = playground_teams(named=request.GET.get("team"))
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
        "weights_by_mode": {mode: {name: f"{value:.2f}" for name, value in weights.items()}
                            for mode, weights in form.weights_by_mode.items()},
    }
    return TemplateResponse(request, "admin/lessons/search_playground.html", context)
