"""The lesson and memory lists' search box, ranked by the search engine.

Django's stock search does `icontains` on each word ("database security" found 0 of 196 lessons);
here a query runs the engine's hybrid search over the teams the list shows, with the list's own
sidebar filters (team, status, category, embedding; memories: version, importance; every status
when no status is chosen) applied by the engine before it keeps its best 50, whichever spelling
the URL names them in, and the list shows the hits in rank order with their relevance and score.
Without a query the list is the usual one.
The logic is in `lessons.selectors.admin_search`; this module only translates the list's query
string into it.

Evaluation teams (`eval-*`) are left out of the lists unless the team filter asks for them.
"""

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ORDER_VAR, SEARCH_VAR
from django.db.models import FloatField, IntegerField, TextField
from django.db.models.expressions import RawSQL
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from lessons.admin.common import CheckedChangeList
from lessons.admin.curation import team_label
from lessons.admin.embeddings import EmbeddingStatusFilter
from lessons.models import EmbeddingStatus
from lessons.search import SearchFilters
from lessons.selectors.admin_search import ALL_LESSON_STATUSES, admin_list_search, admin_teams, evaluation_team_q

ALL_TEAMS = "all"
MEMORY_VERSION_PARAMETER = "version_state"  # the memory list's version filter (MemoryCurrentFilter)


class CuratedTeamFilter(admin.SimpleListFilter):
    """Team, leaving evaluation teams out unless one of them (or "all") is chosen. Same query
    parameter as Django's own team filter, so existing links keep working."""

    title = "team"
    parameter_name = "team__id__exact"

    def lookups(self, request, model_admin):
        # named as the list's column and the curation pages name them: "Acme (acme)"
        choices = [(str(team.pk), team_label(team)) for team in admin_teams(include_evaluation=False)]
        evaluation = admin_teams(include_evaluation=True).filter(evaluation_team_q(prefix=""))
        choices += [(str(team.pk), f"{team_label(team)} (evaluation)") for team in evaluation]
        if evaluation:
            choices.append((ALL_TEAMS, "All, with evaluation teams"))
        return choices

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset.exclude(evaluation_team_q())
        if value == ALL_TEAMS:
            return queryset
        if not value.isdigit():
            raise IncorrectLookupParameters(f"team: {value!r} is not a team id")
        return queryset.filter(team_id=int(value))


# A team named by hand rather than by the sidebar (`?team=3`): the list keeps its rows, so the
# engine searches it alone, or it took the best 50 of every team and the list kept that team's few.
TEAM_ID_LOOKUPS = ("team", "team_id", "team__id", "team__pk")


def teams_to_search(request):
    value = request.GET.get(CuratedTeamFilter.parameter_name)
    if value is None:
        teams = list(admin_teams(include_evaluation=False))
    elif value == ALL_TEAMS:
        teams = list(admin_teams(include_evaluation=True))
    elif value.isdigit():
        teams = list(admin_teams(include_evaluation=True).filter(pk=int(value)))
    else:
        return []
    chosen = chosen_filter_values(request)
    for lookup in TEAM_ID_LOOKUPS:
        if lookup in chosen:
            teams = [team for team in teams if str(team.pk) in chosen[lookup]]
    return teams


RANK = "search_rank"


def _is_rank(part) -> bool:
    return isinstance(part, str) and part.lstrip("-") == RANK


class EngineSearchChangeList(CheckedChangeList):
    """Carries the engine's search (if any) to the search form's template, and orders its hits.

    Django orders the rows before it calls `get_search_results`, but the rank is a column that
    only the search adds: the ordering is worked out here and applied there (rank order unless
    the curator clicked a column, the relevance column included)."""

    def __init__(self, request, *args, **kwargs):
        self.searching = bool(request.GET.get(SEARCH_VAR, "").strip())
        super().__init__(request, *args, **kwargs)
        if self.searching:
            # A count beside a filter would count the best page of hits, not what the filter
            # holds ("Proposed (0)" that then lists 9): no counts while searching.
            self.add_facets = self.is_facets_optional = False

    def default_rows(self, queryset):
        return queryset.exclude(evaluation_team_q())  # CuratedTeamFilter's default

    def get_filters(self, request):
        filters = super().get_filters(request)
        filter_specs, _, remaining_lookups, _, _ = filters
        # for the engine's filters: the admin's get_search_results, which runs it next, sees only the request
        request._list_filter_values = list_filter_values(filter_specs, remaining_lookups)
        return filters

    def _sorted_by_curator(self) -> bool:
        """Whether `o` names a sortable column (Django skips the others, e.g. `o=abc` or `o=99`)."""
        if ORDER_VAR not in self.params:
            return False
        columns = super().get_ordering_field_columns()
        return any(index < len(self.list_display) and self.get_ordering_field(self.list_display[index])
                   for index in columns)

    def get_ordering(self, request, queryset):
        ordering = super().get_ordering(request, queryset)
        if not self.searching:
            return ordering
        request._search_ordering = ordering if self._sorted_by_curator() else [RANK, "pk"]
        return [part for part in ordering if not _is_rank(part)]

    def get_ordering_field_columns(self):
        if self.searching and not self._sorted_by_curator() and "search_relevance" in self.list_display:
            return {self.list_display.index("search_relevance"): "asc"}  # the arrow where the order is
        return super().get_ordering_field_columns()

    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        self.engine_search = getattr(request, "_engine_search", None)
        self.playground_url = None
        if self.engine_search is not None and self.engine_search.error is None and len(self.engine_search.teams) == 1:
            # the playground searches one team: a search across several has no "same query" there
            params = playground_parameters(self.engine_search)
            self.playground_url = reverse("admin:lessons_search_playground") + "?" + urlencode(params, doseq=True)
        return queryset


def playground_parameters(found) -> dict:
    """The list's search as the playground's query string: its team, query, page size and filters
    (a link that kept only the query searched confirmed lessons, or every importance, and the
    curator asking "why this order?" saw another list)."""
    filters = found.filters
    params = {"team": found.teams[0], "kind": found.kind, "q": found.query, "limit": found.limit}
    if found.kind == "lessons":
        params["status"] = list(filters.statuses)
    if filters.categories:
        params["category"] = ", ".join(filters.categories)
    for name in ("min_importance", "max_importance"):
        if getattr(filters, name) is not None:
            params[name] = getattr(filters, name)
    if filters.embedding_states:  # the list's embedding filter ("stale" rows only)
        params["embedding"] = list(filters.embedding_states)
    if filters.only_versions:
        params["only_versions"] = "on"
    elif filters.include_versions:
        params["include_versions"] = "on"
    return params


class EngineSearchMixin:
    """For the lesson and memory admins (before ModelAdmin). Subclasses set `search_kind` and
    turn their list's filters into the engine's with `engine_search_filters(request)`."""

    search_kind = "lessons"
    search_help_text = "Ranked by meaning and words (the search engine), within the list's filters."

    def engine_search_filters(self, request) -> SearchFilters:
        raise NotImplementedError

    def get_changelist(self, request, **kwargs):
        return EngineSearchChangeList

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        if request.GET.get("q", "").strip():
            columns.insert(1, "search_relevance")
        return columns

    def get_search_results(self, request, queryset, search_term):
        query = search_term.strip()
        if not query:
            return queryset, False
        found = getattr(request, "_engine_search", None)
        if found is None or found.query != query:
            found = admin_list_search(
                kind=self.search_kind,
                query=query,
                teams=teams_to_search(request),
                filters=self.engine_search_filters(request),
                limit=self.list_per_page,  # the best hits fit on one page
            )
            request._engine_search = found
            if found.error is not None:  # "Search refused, query: is 2001 characters long; ..."
                refused = f"Search refused, {found.error.field}: {found.error.message}"
                self.message_user(request, refused, messages.ERROR)
            elif found.degraded_reason:
                self.message_user(
                    request, f"Searched by words only, the model is unavailable: {found.degraded_reason}", messages.WARNING
                )
        if not found.rows:
            return queryset.none(), False
        queryset = queryset.filter(pk__in=found.ids).annotate(**_ranking_columns(queryset.model, found.rows))
        # the changelist's ordering (EngineSearchChangeList.get_ordering), now that the rank exists
        return queryset.order_by(*getattr(request, "_search_ordering", [RANK, "pk"])), False

    @admin.display(description="relevance", ordering=RANK)
    def search_relevance(self, obj):
        relevance = getattr(obj, "search_relevance", None)
        if relevance is None:
            return "-"
        return format_html(
            '<span class="relevance relevance-{}" title="rank {}">{}</span> <span class="quiet">{}</span>',
            relevance,
            obj.search_rank,
            relevance,
            f"{obj.search_score:.2f}",
        )


def _ranking_columns(model, rows) -> dict:
    """The hits' rank, score and relevance as columns, looked up in three array parameters by the
    row's position in the ids array (one expression each, however many hits; a CASE with a WHEN
    per hit cost Django ~100 ms to compile for 100 hits)."""
    position = f'array_position(%s::bigint[], "{model._meta.db_table}"."id")'
    ids = [row.id for row in rows]
    return {
        RANK: RawSQL(position, [ids], output_field=IntegerField()),
        "search_score": RawSQL(f"(%s::float8[])[{position}]", [[row.score for row in rows], ids], output_field=FloatField()),
        "search_relevance": RawSQL(
            f"(%s::text[])[{position}]", [[row.relevance for row in rows], ids], output_field=TextField()
        ),
    }


def list_filter_values(filter_specs, remaining_lookups) -> dict[str, tuple[str, ...]]:
    """What the list filters on, by field, in whichever spelling the URL chose it: the sidebar's link
    for a plain field is `?category=` (Django's AllValuesFieldListFilter), for a field with choices
    `?status__exact=`, and older links and typed URLs say `?category__exact=`. Reading one spelling
    per field, the engine searched without the other's filter, kept its best 50 and the list cut
    those to the category afterwards ("0 results" for 21 hits). A field's lookups are keyed without
    `__exact`; a custom filter's by its parameter. Both spellings at once filter on both in the
    list, so the values both allow are kept."""
    chosen = {}

    def choose(key, values):
        values = tuple(value for value in values if isinstance(value, str))  # not `__isnull`'s booleans
        chosen[key] = values if key not in chosen else tuple(value for value in chosen[key] if value in values)

    for spec in filter_specs:
        if isinstance(spec, admin.SimpleListFilter):
            if spec.value() is not None:
                choose(spec.parameter_name, [spec.value()])
            continue
        for lookup, values in spec.used_parameters.items():
            choose(lookup.removesuffix("__exact"), values)
    for lookup, values in remaining_lookups.items():
        choose(lookup.removesuffix("__exact"), values)
    return chosen


def chosen_filter_values(request) -> dict[str, tuple[str, ...]]:
    """The list's filter values the changelist read (`list_filter_values`); none outside a list."""
    return getattr(request, "_list_filter_values", {})


def _embedding_states(chosen) -> tuple[str, ...]:
    """The list's embedding filter, for the engine: applied to its best 50 instead, it missed the
    stale rows a query ranks lower ("0 results" where the list without `q` showed them)."""
    states = chosen.get(EmbeddingStatusFilter.parameter_name, ())
    return tuple(state for state in states if state in EmbeddingStatus.values)


def lesson_search_filters(request) -> SearchFilters:
    """The lesson list's sidebar filters (status, category, embedding; the team is `teams_to_search`)
    as the engine's, so that they narrow its search, not its best 50: every status unless one is
    chosen."""
    chosen = chosen_filter_values(request)
    statuses = tuple(status for status in chosen.get("status", ()) if status in ALL_LESSON_STATUSES)
    return SearchFilters(
        statuses=statuses or ALL_LESSON_STATUSES,
        categories=chosen.get("category", ()),
        embedding_states=_embedding_states(chosen),
    )


def _importance(value: str) -> int | None:
    try:
        importance = int(value)
    except ValueError:
        return None
    return importance if 1 <= importance <= 10 else None


def memory_search_filters(request) -> SearchFilters:
    """The memory list's sidebar filters (version, importance, embedding; the team is
    `teams_to_search`) as the engine's. The importance chosen is exact, for the engine too: as a
    minimum, the best 50 at that importance or above were then cut to those at it, and memories at
    it ranked 51st or lower overall were missed. Several importances (typed, the sidebar picks one)
    are searched as the range they span, which the list then narrows to them."""
    chosen = chosen_filter_values(request)
    importances = [number for number in map(_importance, chosen.get("importance", ())) if number is not None]
    version_state = (chosen.get(MEMORY_VERSION_PARAMETER) or ("",))[-1]
    return SearchFilters(
        min_importance=min(importances, default=None),
        max_importance=max(importances, default=None),
        # the list's version filter, searched as it lists: "Earlier versions" searches them alone (the
        # best 50 of current and earlier together, then filtered, left a handful and missed others)
        include_versions=version_state in ("earlier", "all"),
        only_versions=version_state == "earlier",
        embedding_states=_embedding_states(chosen),
    )
