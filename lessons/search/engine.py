"""The hybrid search engine: the one place where lessons and memories are ranked.

    score = w_semantic * S * penalty + w_keyword * K + w_quality * Q

Every part is absolute evidence, on a scale fixed in advance, never stretched over this search's
candidates (dividing by the best candidate turned flat, meaningless cosines into 0.79-1.00 and gave
1.0 to a row matching one frequent word of two):
- S, meaning: the cosine to the query moved toward its nearest rows (dense pseudo-relevance
  feedback, settings.SEARCH_FEEDBACK) mapped through calibrated bounds, clip((cos - lo) / (hi - lo))
  (settings.SEARCH_CALIBRATION; all-MiniLM-L6-v2's unrelated texts sit near lo, close paraphrases
  near hi). With `context`: 0.6 x S(primary) + 0.4 x S(query + context keywords), seed 001.
- K, words: BM25 over the query's own attainable maximum, sum over its terms of qtf x idf x (k1 + 1)
  (terms no row has included), times a calibrated gain, clipped to 1: matching one of two terms
  cannot reach 1, matching only a common word stays small. For lessons, when the caller gives a
  tech stack or project type, the slot holds 0.5 x K + 0.5 x metadata (the share of the caller's
  tech stack the lesson names, and 1/0 for naming the caller's project type).
- Q, quality: lessons 0.7 x confidence + 0.3 x min(1, ln(1 + frequency) / ln 11); memories
  0.7 x importance / 10 + 0.3 x 0.5^(age in days / 180); plus SEARCH_USAGE_WEIGHT x the usage
  signal (usage.py) for rows agents reported using, capped at 1 (kinds.py).
- penalty: a lesson naming tech stacks, none of them the caller's, has S halved (seed 000).
- label feedback (a hybrid search on the default weights, of a kind with feedback labels: a
  lesson's tags): the score returned is (score + lambda x L) / (1 + lambda), L = 1 for a row
  sharing a tag with the search's `top` best rows, else 0 (settings.SEARCH_LABEL_FEEDBACK: top 3,
  lambda 0.15). Tags name what a lesson is about in the curators' words, so the best hits' tags
  reach lessons neither the model nor the query's words did (scoring.label_feedback).
Weights: the request's, else settings.SEARCH_WEIGHTS for short queries (<= 2 content terms) moving
linearly to settings.SEARCH_WEIGHTS_LONG at 8 terms for lessons, 4 for memories
(settings.SEARCH_QUERY_LENGTH_SPAN; short queries lean on meaning, long ones on words, and a
question about a conversation's memories names what it asks in words: measured on the dev sets),
renormalised over the parts a search can use (text mode and a search without a model have no S;
semantic mode no K unless the caller gave a tech stack or project type), so every score is 0..1
and means the same across searches.
Because the parts are absolute, a leg with little to say (flat cosines, only common words
matched) contributes little and differs little between candidates: the other leg ranks.

`fusion="rrf"`: score = sum over parts of weight / (60 + rank by that part), over its maximum.

Candidates: a semantic leg (HNSW, top N by cosine; with context a second one for the contextual
query), a BM25 leg (keyword.py) and an exact-term leg (exact.py), each with every filter inside
its SQL, N = max(50, min(3 x limit, limit + 50)): three times the page for small pages, at most
50 beyond it for large ones (at limit 100, legs of 300 made a SciFact search 45% slower than legs
of 150, for the same nDCG@10). Then:
1. semantic-only candidates under the similarity floor are dropped: the request's
   `similarity_floor`, else an adaptive one, min(SEARCH_SIMILARITY_FLOOR, best cosine of the
   search - SEARCH_SIMILARITY_BAND), so a short query with flat cosines is not starved;
2. lessons with the same title collapse into one (confidence = max, frequency = sum);
3. ranking: for a short query (<= 3 terms), rows carrying every query term exactly (a tag, tech
   stack, category or title word: `nextjs`, `RLS`) come first, then by score; for a one-word
   query, rows whose text carries the word too (a lookup: an error code, a name; exact.py);
4. label feedback (above), then ranking again;
5. relevance: each hit's own cosine and BM25 on their fixed scales, weighted as the search weighs
   them (with context, the two cosines 0.6 / 0.4 as in S; weights all on quality: the default
   weights), against settings.SEARCH_RELEVANCE_THRESHOLDS (scoring.relevance_label).

Budget: one encode per query text and four SQL statements (statements.py). The encodes (primary
and contextual, each on a worker thread, encode.py) run while a probe of the stored document
frequencies picks the BM25 leg's plan (keyword.py) and statement 1 (BM25 and exact-term legs:
ids and scores) runs; in a hybrid search statement 2a (the semantic legs: ids and cosines) runs
on a second connection as soon as the encode ends, beside statement 1, when the search is alone
in its process (parallel.py; under load and inside a transaction it runs after statement 1, on
the same connection); statement 2b drops the semantic-only candidates under the floor and
fetches the fields and similarities of the rest, all but the long texts no score reads, which a
last statement fetches for the page's hits only (statements.with_display_fields). `text` mode
(and a search without a model) is statement 1 alone, with every field; an encode failing after
statement 1 costs a second statement for the fields.
A row without a vector yet (just written, its embedding queued) is scored on words and quality,
its weights renormalised without meaning, as a search without the model scores every row; its
explanation says `embedding: pending` and `candidates.not_embedded` counts such rows.
Fallbacks: no model -> keyword + quality, `degraded` with the reason; no query or nothing found ->
the most recently updated rows (same-title lessons folded as in 2), `fallback="recency"`. A query
the model reads no word of (emoji, symbols, a script its vocabulary lacks; encode.model_reads) is
not encoded: hybrid mode searches it by its words, semantic mode finds nothing, so a query without
a readable word at all answers the recency fallback in every mode, as text mode always did. With a
`context` the model reads, the contextual query is encoded alone and S is its meaning.
A short query whose exact term a row carries only in another stored spelling costs one statement
more: that row's words measured in its own spelling (exact.with_spelled_keyword_signals).
"""

import unicodedata
from time import perf_counter

from django.conf import settings
from django.utils import timezone

from lessons.search import scoring
from lessons.search.context import STOP_WORDS, contextual_query, extract_keywords
from lessons.search.encode import encode_in_background, model_reads, model_unavailable_reason
from lessons.search.exact import EXACT_TIER_MAX_TERMS, with_spelled_keyword_signals
from lessons.search.filters import filter_parts
from lessons.search.hits import candidate_from_row, hit_from_candidate, recency_hits, respond
from lessons.search.keyword import english_lexemes
from lessons.search.kinds import SEARCH_KINDS
from lessons.search.parallel import legs_beside_allowed, result_or_none, run_beside, search_under_way
from lessons.search.semantic import vector_literal
from lessons.search.statements import (
    LEG_NAMES,
    Scope,
    candidate_statement,
    keyword_statement,
    recent_rows,
    rows_with_fields,
    semantic_legs,
    with_display_fields,
)
from lessons.search.types import SearchRequest, SearchResponse
from lessons.search.validation import validate
from lessons.text import clean_text

MIN_CANDIDATES = 50
CANDIDATES_BEYOND_LIMIT = 50
# The recency fallback reads this many rows past its page, so same-title lessons can fold.
RECENCY_FOLD_ROOM = 50


def search_leg_limit(limit: int) -> int:
    """How many candidates each leg brings for a search of `limit` results: three times the page,
    but at most CANDIDATES_BEYOND_LIMIT more than it (a leg's deep tail seldom reaches a large
    page's fused top, and every candidate costs its fields and its scoring)."""
    return max(MIN_CANDIDATES, min(3 * limit, limit + CANDIDATES_BEYOND_LIMIT))


def query_default_weights(*, query: str, kind: str) -> dict[str, float]:
    """The weights a search of `query` takes when the caller gives none: the settings' short-query
    weights moving to the long ones with the query's length (scoring.query_length_weights)."""
    return scoring.query_length_weights(
        dict(settings.SEARCH_WEIGHTS), settings.SEARCH_WEIGHTS_LONG, terms=len(scoring.query_terms(query, STOP_WORDS)),
        span=settings.SEARCH_QUERY_LENGTH_SPAN[kind],
    )


def search(*, request: SearchRequest) -> SearchResponse:
    """Run one search. Raises SearchRequestError for a request it cannot run."""
    with search_under_way():  # a busy process runs the semantic legs after statement 1 (parallel.py)
        return _search(request=request)


def _search(*, request: SearchRequest) -> SearchResponse:
    started = perf_counter()
    weights, requested_floor = validate(request)
    kind = SEARCH_KINDS[request.kind]
    clause = filter_parts(kind=request.kind, team_id=request.team.pk, filters=request.filters)
    scope = Scope(kind, clause.sql, clause.params, narrowed=request.filters.narrows,
                  signature_masks=clause.signature_masks)
    timings: dict[str, float] = {"embed": 0.0, "sql": 0.0, "fuse": 0.0}
    # as every text is stored (lessons.text): "crème" typed with a combining accent is the same
    # word, and "pass\u200bword" is "password"
    query = " ".join(clean_text(request.query).split())
    if not query:
        return _recency_response(request=request, scope=scope, timings=timings, started=started,
                                 degraded_reason=None, candidates={})

    keywords = extract_keywords(clean_text(request.context)) if request.context else []
    keyword_query = " ".join(clean_text(request.keyword_query or "").split()) or query
    contextual = contextual_query(query, keywords) if keywords else None
    per_leg = search_leg_limit(request.limit)
    term_forms = scoring.query_term_forms(keyword_query, STOP_WORDS)
    terms = list(term_forms)
    # a word with no canonical term (another script) still counts: it cannot be carried exactly,
    # so the query forms no tier ("database безопасности" put every `database` lesson first)
    query_exact_terms = terms if 0 < len(terms) <= EXACT_TIER_MAX_TERMS and not scoring.unlisted_words(
        keyword_query, STOP_WORDS) else []
    exact_terms = query_exact_terms if request.mode != "semantic" else []
    default_weights = query_default_weights(query=query, kind=kind.name)
    if request.weights is None:  # the caller's own weights are taken as they are
        weights = default_weights

    # Encode and query at once: statement 1 runs while the model encodes on the other core, and in
    # a hybrid search a worker thread runs the semantic legs on its own connection as soon as the
    # encode ends (parallel.py).
    # A query the model reads no word of ("😀", "→→", a script it lacks) has no meaning to measure:
    # its vector is the unknown word piece's, whatever it says (encode.model_reads). It is searched
    # by its words alone, and in semantic mode by nothing: the recency fallback, as text mode
    # answers a query without a word either.
    # The model reads the query in its compatibility form, as the keyword index does (migration
    # 0030): "ＲＥＡＣＴ hooks", typed on a CJK keyboard, was "[UNK] hooks" to it.
    for_model = [unicodedata.normalize("NFKC", text) for text in [query] + ([contextual] if contextual else [])]
    query_unreadable = request.mode != "text" and not model_reads(for_model[0])
    # An unreadable query beside a readable context ("😀" and an editor's code): the contextual query is
    # the one text with a meaning, so it is encoded alone and S is its meaning (before, the context was
    # dropped with the query and semantic mode answered the recency fallback).
    context_alone = query_unreadable and len(for_model) > 1 and model_reads(for_model[1])
    if context_alone:
        for_model = for_model[1:]
    unreadable = query_unreadable and not context_alone
    encoding = (encode_in_background(for_model)
                if request.mode != "text" and not unreadable else None)
    model_off = request.mode != "text" and model_unavailable_reason() is not None
    beside = None
    if encoding is not None and request.mode == "hybrid" and not model_off and legs_beside_allowed():
        beside = run_beside(_encoded_semantic_legs, encoding=encoding, scope=scope, limit=per_leg)
    keyword_legs = dict(scope=scope, team_id=request.team.pk, keyword_query=keyword_query, term_forms=term_forms,
                        limit=per_leg)
    tick = perf_counter()
    keyword_rows, leg_counts = [], {}
    if request.mode != "semantic":
        keyword_rows, leg_counts = keyword_statement(**keyword_legs, exact_terms=exact_terms,
                                                     with_fields=request.mode == "text" or model_off or unreadable)
    # 1 when the keyword leg's heads could not prove their top k is BM25's (keyword.py)
    keyword_unproved = leg_counts.pop("keyword_unproved", 0)
    timings["sql"] = _ms(tick)

    vectors, literals, semantic, degraded_reason = [], [], None, None
    encoded = result_or_none(beside) if beside is not None else None
    if encoded is not None:
        vectors, literals, degraded_reason, timings["embed"], semantic, legs_ms = encoded
        timings["sql"] += legs_ms  # on the other connection, beside statement 1
    elif encoding is not None:
        vectors, degraded_reason, timings["embed"] = encoding.result()
        literals = [vector_literal(vector) for vector in vectors]
    elif model_off:  # no encode was asked for (an unreadable query), and the model is off all the same
        degraded_reason = model_unavailable_reason()
    use_semantic = bool(vectors)
    use_keyword = request.mode != "semantic" or not use_semantic  # semantic mode without a model: words
    tick = perf_counter()
    rows, union = keyword_rows, None
    if use_semantic:
        if semantic is None:
            semantic = semantic_legs(scope=scope, vectors=literals, limit=per_leg)
        floor = requested_floor
        rows, union = candidate_statement(
            scope=scope, vectors=literals, semantic=semantic, keyword_rows=keyword_rows,
            floor=settings.SEARCH_SIMILARITY_FLOOR if floor is None else floor,
            band=settings.SEARCH_SIMILARITY_BAND if floor is None else None,
            feedback=_feedback(vectors[0]),
        )
        leg_counts = {**{LEG_NAMES[name]: len(found) for name, found in semantic.items()}, **leg_counts}
    elif request.mode == "semantic" and degraded_reason is not None:  # the model is off or failed
        degraded_reason = f"{degraded_reason}; semantic mode answered by keywords and quality"
        exact_terms = query_exact_terms
        rows, leg_counts = keyword_statement(**keyword_legs, exact_terms=exact_terms, with_fields=True)
        keyword_unproved = leg_counts.pop("keyword_unproved", 0)
    elif request.mode == "hybrid" and not model_off and not unreadable:
        rows = rows_with_fields(kind=kind, keyword_rows=keyword_rows)  # the encode failed
    timings["sql"] += _ms(tick)

    if exact_terms and rows:
        # a row carrying a term only in another stored spelling ("errorhandling": the tag "error
        # handling") has its words measured in that spelling, which BM25 reads as other words (exact.py)
        tick = perf_counter()
        with_spelled_keyword_signals(kind=kind, team_id=request.team.pk, query=keyword_query, rows=rows,
                                     exact_terms=exact_terms,
                                     written=scoring.query_written_forms(keyword_query, STOP_WORDS))
        timings["sql"] += _ms(tick)

    # --- fuse ------------------------------------------------------------------------------------
    tick = perf_counter()
    # a one-word lookup phrased with filler words ("using retries"): the word's own English terms
    filler_words = len(exact_terms) == 1 and len(keyword_query.split()) > 1
    lookup_lexemes = english_lexemes(exact_terms[0]) if rows and filler_words else frozenset()
    candidates = [candidate_from_row(kind=kind, row=row, exact_terms=exact_terms, query_terms=terms,
                                     lookup_lexemes=lookup_lexemes) for row in rows]
    if union is None:
        union = len(candidates)
    collapsed = 0
    if kind.collapse_same_title:
        candidates, collapsed = scoring.collapse_same_title(candidates)
    caller_metadata = kind.caller_metadata and bool(request.tech_stack or request.project_type)
    active = dict(semantic=use_semantic, keyword=use_keyword or caller_metadata)
    plan = scoring.ScoringPlan(
        kind=kind,
        weights=scoring.active_weights(weights, **active),
        default_weights=scoring.active_weights(default_weights, **active),
        has_semantic=use_semantic,
        has_keyword=use_keyword,
        has_context=contextual is not None and not context_alone,
        context_weights=settings.SEARCH_CONTEXT_WEIGHTS,
        calibration=settings.SEARCH_CALIBRATION,
        tech_stack=tuple(request.tech_stack) if kind.caller_metadata else (),
        project_type=request.project_type if kind.caller_metadata else None,
        now=timezone.now(),
    )
    scoring.score_parts(candidates, plan)
    if request.fusion == "rrf":
        scoring.rrf_scores(candidates, plan, k=settings.SEARCH_RRF_K)
    ranked = scoring.rank(candidates, exact_tier=bool(exact_terms))
    # Label feedback: a weighted hybrid search on the default weights (a caller's own weights are
    # taken as they are); measured on the hybrid, the legs stay what their names say.
    if request.mode == "hybrid" and use_semantic and request.fusion == "weighted" and request.weights is None:
        scoring.label_feedback(ranked, kind=kind, top=settings.SEARCH_LABEL_FEEDBACK["top"],
                               weight=settings.SEARCH_LABEL_FEEDBACK["weight"])
        ranked = scoring.rank(ranked, exact_tier=bool(exact_terms))
    ranked = ranked[: request.limit]
    counts = {
        **leg_counts,
        "union": union,
        "duplicates_removed": sum(leg_counts.values()) - union,
        "below_floor": union - len(rows),
        "collapsed": collapsed,
        **({"keyword_unproved": keyword_unproved} if keyword_unproved else {}),
    }
    if pending := sum(scoring.vector_pending(candidate, measured_meaning=use_semantic) for candidate in candidates):
        counts["not_embedded"] = pending  # scored without meaning until their vectors are made
    timings["fuse"] = _ms(tick)

    if not ranked:
        return _recency_response(request=request, scope=scope, timings=timings, started=started,
                                 degraded_reason=degraded_reason, candidates=counts)
    tick = perf_counter()
    with_display_fields(kind=kind, rows=[candidate.row for candidate in ranked])
    timings["sql"] += _ms(tick)
    hits = [hit_from_candidate(request=request, kind=kind, candidate=c, plan=plan) for c in ranked]
    return respond(request=request, hits=hits, timings=timings, started=started, degraded_reason=degraded_reason,
                   fallback=None, candidates=counts, keywords=keywords)


def _encoded_semantic_legs(*, encoding, scope: Scope, limit: int):
    """On a worker thread: wait for the encode, then run the semantic legs on this thread's
    connection. Returns (vectors, their pgvector literals, degraded reason, encode ms, the legs or
    None, legs ms)."""
    vectors, degraded_reason, embed_ms = encoding.result()
    literals = [vector_literal(vector) for vector in vectors]
    if not vectors:
        return vectors, literals, degraded_reason, embed_ms, None, 0.0
    tick = perf_counter()
    legs = semantic_legs(scope=scope, vectors=literals, limit=limit)
    return vectors, literals, degraded_reason, embed_ms, legs, _ms(tick)


def _feedback(query_vector) -> dict | None:
    """The feedback vector's parameters (settings.SEARCH_FEEDBACK), None when it is off."""
    config = settings.SEARCH_FEEDBACK
    if not config or config.get("k", 0) <= 0 or config.get("beta", 0) <= 0:
        return None
    return {"k": int(config["k"]), "query_over_beta": vector_literal(query_vector / float(config["beta"]))}


def _recency_response(*, request, scope, timings, started, degraded_reason, candidates) -> SearchResponse:
    """No query, or nothing found: the most recently updated rows, labelled low (they matched nothing).
    No row passes the filters at all: no fallback either, an empty answer."""
    tick = perf_counter()
    if scope.kind.collapse_same_title:
        # Same-title lessons fold here too (a page of five copies of one lesson answered nothing
        # new); the rows beyond the page give the fold room, as the legs' candidates do.
        rows = recent_rows(scope=scope, limit=request.limit + RECENCY_FOLD_ROOM)
        grouped = scoring.collapse_same_title_rows(rows)[: request.limit]
    else:
        grouped = [(row, [row["id"]]) for row in recent_rows(scope=scope, limit=request.limit)]
    timings["sql"] = timings.get("sql", 0.0) + _ms(tick)
    hits = recency_hits(request=request, kind=scope.kind, rows=grouped)
    return respond(request=request, hits=hits, timings=timings, started=started, degraded_reason=degraded_reason,
                   fallback="recency" if hits else None, candidates=candidates, keywords=[])


def _ms(since: float) -> float:
    return (perf_counter() - since) * 1000.0
