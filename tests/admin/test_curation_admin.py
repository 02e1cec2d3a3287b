"""The curation pages' server side: bad input is an admin message (never a 500), permissions hold,
a merge never crosses teams. The pages themselves are driven in a browser in tests/browser/."""

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from lessons.models import DuplicateDismissal, Lesson, Memory
from lessons.services import lessons as lesson_services
from lessons.services.memories import memory_create, memory_update
from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, embed, lesson

pytestmark = pytest.mark.django_db

DUPLICATES = reverse("admin:lessons_lesson_duplicates")
PROPOSALS = reverse("admin:lessons_lesson_proposals")
MEMORY_DUPLICATES = reverse("admin:lessons_memory_duplicates")


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.mark.parametrize("query", ["threshold=abc", "threshold=0", "threshold=3", "limit=-1", "team=nobody"])
def test_bad_filters_are_shown_on_the_page(admin_client, team, query):
    for url in (DUPLICATES, MEMORY_DUPLICATES):
        response = admin_client.get(f"{url}?{query}")
        assert response.status_code == 200
        assert response.context["form"].errors  # named next to the filter, the page still answers


def test_unknown_team_shows_nothing_rather_than_another_team(admin_client, team):
    pin, pin_again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    embed(pin, pin_again)
    assert len(admin_client.get(DUPLICATES, {"team": "acme"}).context["pairs"]) == 1
    response = admin_client.get(DUPLICATES, {"team": "nobody"})
    assert response.context["pairs"] == []
    assert "Select a valid choice" in response.content.decode()


@pytest.mark.parametrize("url, rows", [(DUPLICATES, "lessons"), (MEMORY_DUPLICATES, "current memories")])
def test_invalid_filters_show_their_errors_and_no_claim_about_pairs(admin_client, team, url, rows):
    """`threshold=abc&limit=-3` showed the errors and "0 pairs ... closer than 0.15", "No two lessons in
    acme are closer than 0.15. Look wider (0.30)": a search that was not the one asked for."""
    page = admin_client.get(f"{url}?threshold=abc&limit=-3").content.decode()
    assert "Threshold: Enter a number." in page and "Limit: Ensure this value is greater than" in page
    after_filters = page.split('class="curation-filter"', 1)[1].split("</form>", 1)[1]
    for claim in (" pair", f"No two {rows}", "Look wider", "No such team"):
        assert claim not in after_filters, claim
    valid = admin_client.get(f"{url}?threshold=0.2").content.decode()
    assert f"No two {rows} in Acme are closer than 0.20" in valid


@pytest.mark.parametrize(
    "data",
    [
        {"action": "merge"},
        {"action": "merge", "first": "x", "second": "1"},
        {"action": "merge", "first": "FIRST", "second": "SECOND", "keep": "999999", "text_from": "FIRST"},
        {"action": "explode", "first": "FIRST", "second": "SECOND"},
        {"action": "dismiss", "first": "FIRST", "second": "999999"},
    ],
)
def test_bad_merge_requests_are_messages_and_change_nothing(admin_client, team, data):
    pin, pin_again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    ids = {"FIRST": str(pin.pk), "SECOND": str(pin_again.pk)}
    response = admin_client.post(DUPLICATES, {name: ids.get(value, value) for name, value in data.items()}, follow=True)
    assert response.status_code == 200
    assert messages_of(response)
    assert Lesson.objects.count() == 2
    assert not DuplicateDismissal.objects.exists()


def test_a_merge_across_teams_is_refused_with_a_message(admin_client, team, other_team):
    ours, theirs = lesson(team, DOCKER_PIN), lesson(other_team, DOCKER_PIN_AGAIN)
    response = admin_client.post(
        DUPLICATES,
        {"action": "merge", "first": ours.pk, "second": theirs.pk, "keep": ours.pk, "text_from": ours.pk},
        follow=True,
    )
    assert any("another team" in text for text in messages_of(response))
    assert Lesson.objects.count() == 2


def test_the_redirect_stays_on_this_site(admin_client, team):
    pin, pin_again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    response = admin_client.post(
        DUPLICATES, {"action": "dismiss", "first": pin.pk, "second": pin_again.pk, "next": "https://evil.example/"}
    )
    assert response.status_code == 302
    assert response["Location"] == DUPLICATES


def test_the_queue_opens_on_the_team_with_the_most_proposals_and_says_what_waits_where(admin_client, team):
    # "aardvark" sorts first: the queue used to open on it, "Nothing to review", while acme had two.
    from tests.factories import TeamFactory

    TeamFactory(slug="aardvark", name="aardvark")
    busy = TeamFactory(slug="zebra", name="Zebra")
    for title in ("Pin the base image", "Cache the wheels"):
        lesson(team, {"title": title}, status="proposed")
    lesson(busy, {"title": "Vendor the wheels"}, status="proposed")
    assert '<td class="curation-waiting">3 waiting</td>' in admin_client.get("/admin/").content.decode()
    response = admin_client.get(PROPOSALS)
    assert response.context["team"] == team and response.context["total"] == 2
    page = response.content.decode()
    assert re.search(r'<option value="acme" selected>Acme \(acme\) \u2014 2 waiting</option>', page), page
    assert '<option value="zebra">Zebra (zebra) \u2014 1 waiting</option>' in page
    assert '<option value="aardvark">aardvark</option>' in page  # nothing waits there: no note
    assert admin_client.get(PROPOSALS, {"team": "zebra"}).context["total"] == 1  # a team asked for is kept
    assert admin_client.get(PROPOSALS, {"team": "aardvark"}).context["total"] == 0
    Lesson.objects.filter(status="proposed").update(status="rejected")
    assert admin_client.get(PROPOSALS).context["team"].slug == "aardvark"  # none waits: the first by slug
    assert '<td class="curation-waiting"></td>' in admin_client.get("/admin/").content.decode()


@pytest.mark.parametrize("kind", ["lesson", "memory"])
def test_a_duplicates_page_opens_on_the_team_with_the_most_rows_it_pairs(admin_client, team, kind):
    # "acme" sorts first with one row: the page opened on it, "No two lessons in acme are closer
    # than 0.15", while another team held the duplicates; an evaluation team is not curated here.
    from tests.curation_data import PANIC, PANIC_AGAIN, BASS, FOREIGN_KEYS, embedded_lessons, embedded_memories
    from tests.factories import TeamFactory

    busy, evaluation = TeamFactory(slug="demo", name="Demo"), TeamFactory(slug="eval-scifact", name="eval-scifact")
    if kind == "lesson":
        embedded_lessons(team, FOREIGN_KEYS)
        embedded_lessons(busy, DOCKER_PIN, DOCKER_PIN_AGAIN)
        lesson(busy, FOREIGN_KEYS, status="rejected")  # not paired: does not count
        embedded_lessons(evaluation, DOCKER_PIN, DOCKER_PIN_AGAIN, FOREIGN_KEYS)
        url = DUPLICATES
    else:
        embedded_memories(team, BASS)
        embedded_memories(busy, PANIC, PANIC_AGAIN)
        embedded_memories(evaluation, PANIC, PANIC_AGAIN, BASS)
        url = MEMORY_DUPLICATES
    response = admin_client.get(url)
    assert response.context["team"] == busy and len(response.context["pairs"]) == 1
    assert '<option value="demo" selected>Demo (demo)</option>' in response.content.decode()
    assert admin_client.get(url, {"team": "acme"}).context["team"] == team  # a team asked for is kept
    assert admin_client.get(url, {"threshold": "0.3"}).context["team"] == busy  # other filters alone too


def test_a_handled_proposal_is_not_handled_twice(admin_client, team):
    proposal = lesson(team, DOCKER_PIN, status="proposed")
    target = lesson(team, DOCKER_PIN_AGAIN)
    admin_client.post(PROPOSALS, {"proposal": proposal.pk, "action": "accept"})
    response = admin_client.post(PROPOSALS, {"proposal": proposal.pk, "merge_into": target.pk}, follow=True)
    assert any("already been handled" in text for text in messages_of(response))
    assert Lesson.objects.count() == 2


def test_of_two_curators_deciding_one_proposal_at_once_only_one_is_told_it_is_done(admin_client, team, monkeypatch):
    proposal = lesson(team, DOCKER_PIN, status="proposed")
    accept = lesson_services.lesson_accept_proposals

    def rejected_by_another_curator_first(*, lesson_ids):
        # the other curator's reject lands after this page read the proposal, before it accepts
        lesson_services.lesson_reject_proposals(lesson_ids=lesson_ids)
        return accept(lesson_ids=lesson_ids)

    monkeypatch.setattr(lesson_services, "lesson_accept_proposals", rejected_by_another_curator_first)
    response = admin_client.post(PROPOSALS, {"proposal": proposal.pk, "action": "accept"}, follow=True)
    assert [text for text in messages_of(response) if "already been handled" in text]
    assert not [text for text in messages_of(response) if text.startswith("Accepted")]
    proposal.refresh_from_db()
    assert proposal.status == "rejected"  # the first decision stands


def test_merge_into_with_the_proposals_text(admin_client, team):
    proposal = lesson(team, DOCKER_PIN, status="proposed", frequency=2)
    target = lesson(team, DOCKER_PIN_AGAIN, frequency=3)
    admin_client.post(PROPOSALS, {"proposal": proposal.pk, "merge_into_with_text": target.pk})
    target.refresh_from_db()
    assert (target.title, target.frequency, target.status) == (DOCKER_PIN["title"], 5, "confirmed")
    assert not Lesson.objects.filter(pk=proposal.pk).exists()


def test_viewers_see_the_pages_but_cannot_merge(client, team):
    viewer = User.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_lesson", "view_memory"]))
    client.force_login(viewer)
    pin, pin_again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    embed(pin, pin_again)
    page = client.get(DUPLICATES)
    assert page.status_code == 200
    assert len(page.context["pairs"]) == 1 and 'value="merge"' not in page.content.decode()
    response = client.post(
        DUPLICATES, {"action": "merge", "first": pin.pk, "second": pin_again.pk, "keep": pin.pk, "text_from": pin.pk}
    )
    assert response.status_code == 403
    assert Lesson.objects.count() == 2
    assert client.get(PROPOSALS).status_code == 200
    assert client.post(PROPOSALS, {"proposal": pin.pk, "action": "accept"}).status_code == 403


def test_restore_needs_a_post_and_an_earlier_version_of_that_memory(admin_client, team):
    memory = memory_create(team=team, content="First words")
    memory_update(memory=memory, content="Second words")
    version = Memory.objects.get(current_version=memory)
    other = memory_create(team=team, content="Another memory")
    url = reverse("admin:lessons_memory_restore_version", args=[memory.pk, version.pk])
    opened = admin_client.get(url, follow=True)  # a link opened in a tab: to the history's button, unchanged
    assert opened.redirect_chain[-1][0].endswith(f"/{memory.pk}/change/#history")
    assert any("button in the memory's history" in text for text in messages_of(opened))
    assert admin_client.put(url).status_code == 405
    memory.refresh_from_db()
    assert memory.version == 2
    wrong = reverse("admin:lessons_memory_restore_version", args=[other.pk, version.pk])
    assert admin_client.post(wrong).status_code == 404
    response = admin_client.post(url)
    assert response.status_code == 302 and response["Location"].endswith(f"/{memory.pk}/change/#history")
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("First words", 3)


def test_a_restore_from_a_stale_page_is_refused_and_changes_nothing(admin_client, team):
    """Tab A shows the history; in tab B the text is edited; A's "Restore this version" replaced B's
    edit without a word. Now it is refused, as a stale save of the form is."""
    memory = memory_create(team=team, content="First words")
    memory_update(memory=memory, content="Second words")
    first = Memory.objects.get(current_version=memory, version=1)
    page = admin_client.get(reverse("admin:lessons_memory_change", args=[memory.pk])).content.decode()
    [seen] = set(re.findall(r'name="seen_updated_at" value="([^"]+)"', page))
    memory_update(memory=memory, content="Third words, written in tab B")  # the other tab
    url = reverse("admin:lessons_memory_restore_version", args=[memory.pk, first.pk])
    response = admin_client.post(url, {"seen_updated_at": seen}, follow=True)
    assert any("was changed by someone else at" in text and "Nothing was restored" in text
               for text in messages_of(response))
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Third words, written in tab B", 3)
    # from a page drawn after that edit, the restore goes through
    page = admin_client.get(reverse("admin:lessons_memory_change", args=[memory.pk])).content.decode()
    [seen] = set(re.findall(r'name="seen_updated_at" value="([^"]+)"', page))  # one per restore button
    admin_client.post(url, {"seen_updated_at": seen})
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("First words", 4)


@pytest.mark.parametrize("kind", ["lesson", "memory"])
def test_a_merged_away_rows_page_says_where_it_went(admin_client, team, kind):
    """Its page (and a save from a page opened before the merge) said "Lesson with ID “105” doesn't
    exist. Perhaps it was deleted?" and went to the index."""
    from lessons.services.curation import lesson_merge, memory_merge

    if kind == "lesson":
        kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
        form = {"team": team.pk, "title": "Edited meanwhile", "category": "deployment", "status": "confirmed",
                "description": "", "context": "", "recommendation": "", "confidence": 0.5, "frequency": 1,
                "project_types": "", "tech_stacks": "", "tags": "", "external_id": ""}
        lesson_merge(keep=kept, merged=[other])
    else:
        kept, other = memory_create(team=team, content="Tom plays bass"), memory_create(team=team, content="Tom bass")
        form = {"team": team.pk, "external_id": "", "content": "Edited meanwhile", "details": "", "categories": "",
                "importance": 5, "people": "", "emotions": "", "occurred_at_0": "", "occurred_at_1": ""}
        memory_merge(keep=kept, merged=other)
    kept_url = reverse(f"admin:lessons_{kind}_change", args=[kept.pk])
    for method, data in (("get", None), ("post", form)):
        response = getattr(admin_client, method)(reverse(f"admin:lessons_{kind}_change", args=[other.pk]), data)
        assert response.status_code == 302 and response["Location"] == kept_url
        [message] = messages_of(admin_client.get(kept_url))
        assert message.startswith(f"{kind.capitalize()} #{other.pk} was merged into <a href=\"{kept_url}\">#{kept.pk}")
        assert "doesn’t exist" not in message
        assert ("Your changes were not saved" in message) == (method == "post")
    assert not type(kept).objects.filter(pk=other.pk).exists()  # the stale save brought nothing back
    # a row deleted, not merged, keeps Django's message
    gone = reverse(f"admin:lessons_{kind}_change", args=[other.pk + 1000])
    assert "doesn’t exist. Perhaps it was deleted?" in messages_of(admin_client.get(gone, follow=True))[0]


@pytest.mark.django_db(transaction=True)
def test_a_save_that_waited_for_a_merge_says_where_the_lesson_went(admin_client, team, monkeypatch):
    """Another curator's merge commits after the page's save read the lesson and before it writes:
    the update finds the row gone (it was a 500, then Django's "doesn't exist" and the index)."""
    import threading

    from django.db import connection

    from lessons.services.curation import lesson_merge

    kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    update = lesson_services.lesson_update

    def merge_elsewhere():  # its own connection and transaction, as another curator's request
        try:
            lesson_merge(keep=kept, merged=[other])
        finally:
            connection.close()

    def merged_by_another_curator_first(*, lesson, **changes):
        if lesson.pk == other.pk:  # the admin's save (the merge itself updates the kept lesson)
            thread = threading.Thread(target=merge_elsewhere)
            thread.start()
            thread.join()
        return update(lesson=lesson, **changes)

    monkeypatch.setattr(lesson_services, "lesson_update", merged_by_another_curator_first)
    form = {"team": team.pk, "title": "Edited meanwhile", "category": "deployment", "status": "confirmed",
            "description": "", "context": "", "recommendation": "", "confidence": 0.5, "frequency": 1,
            "project_types": "", "tech_stacks": "", "tags": "", "external_id": ""}
    response = admin_client.post(reverse("admin:lessons_lesson_change", args=[other.pk]), form, follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:lessons_lesson_change", args=[kept.pk])
    assert any(f"Lesson #{other.pk} was merged into" in text and "Your changes were not saved" in text
               for text in messages_of(response))
    assert not Lesson.objects.filter(title="Edited meanwhile").exists()


def test_an_earlier_versions_page_shows_the_history_with_restore(admin_client, team):
    memory = memory_create(team=team, content="First words")
    memory_update(memory=memory, content="Second words")
    version = Memory.objects.get(current_version=memory)
    page = admin_client.get(reverse("admin:lessons_memory_change", args=[version.pk])).content.decode()
    assert "Versions of the text" in page
    assert reverse("admin:lessons_memory_restore_version", args=[memory.pk, version.pk]) in page


def test_the_queue_is_paged_oldest_first(admin_client, team):
    proposals = [lesson(team, {"title": f"Proposal {n}"}, status="proposed") for n in range(12)]
    first = admin_client.get(PROPOSALS, {"team": "acme"})
    assert [review.proposal.pk for review in first.context["reviews"]] == [p.pk for p in proposals[:10]]
    second = admin_client.get(PROPOSALS, {"team": "acme", "page": 2})
    assert [review.proposal.pk for review in second.context["reviews"]] == [p.pk for p in proposals[10:]]
    assert "showing 11–12" in second.content.decode()
    assert admin_client.get(PROPOSALS, {"team": "acme", "page": "x"}).status_code == 200


def test_a_lessons_page_lists_the_lessons_merged_into_it(admin_client, team):
    from lessons.services.curation import lesson_merge

    kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN, frequency=4)
    lesson_merge(keep=kept, merged=[other], text_from=other)
    page = admin_client.get(reverse("admin:lessons_lesson_change", args=[kept.pk])).content.decode()
    assert "Merged into this lesson" in page
    assert f'data-merged="{other.pk}"' in page and "its text kept" in page
    untouched = lesson(team, {"title": "Nothing merged here"})
    assert "Merged into this lesson" not in admin_client.get(
        reverse("admin:lessons_lesson_change", args=[untouched.pk])
    ).content.decode()


def test_a_not_a_duplicate_mark_can_be_taken_back(admin_client, team):
    from lessons.services.curation import duplicate_dismiss

    pin, pin_again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    embed(pin, pin_again)
    mark = duplicate_dismiss(team=team, kind="lesson", first_id=pin.pk, second_id=pin_again.pk)
    assert admin_client.get(DUPLICATES).context["pairs"] == []
    listing = admin_client.get(reverse("admin:lessons_duplicatedismissal_changelist"))
    html = listing.content.decode()
    assert listing.status_code == 200
    # the pair by its titles, each linked to its lesson: two bare ids did not say which pair it was
    for row in (pin, pin_again):
        change = reverse("admin:lessons_lesson_change", args=[row.pk])
        assert f'<a href="{change}">#{row.pk} {row.title}</a>' in html
    memory_mark = duplicate_dismiss(team=team, kind="memory", first_id=memory_create(team=team, content="Hiked").pk,
                                    second_id=memory_create(team=team, content="Went hiking").pk)
    html = admin_client.get(reverse("admin:lessons_duplicatedismissal_changelist")).content.decode()
    assert f"#{memory_mark.low_id} Hiked</a>" in html and f"#{memory_mark.high_id} Went hiking</a>" in html
    admin_client.post(reverse("admin:lessons_duplicatedismissal_delete", args=[mark.pk]), {"post": "yes"})
    assert len(admin_client.get(DUPLICATES).context["pairs"]) == 1


def test_a_memorys_pages_list_the_memories_merged_into_it(admin_client, team):
    from lessons.services.curation import memory_merge

    kept = memory_create(team=team, content="Tom plays bass", people=["Tom"])
    other = memory_create(team=team, content="Tom is a bassist", people=["Lena", "Smith, John"], emotions=["proud"])
    memory_merge(keep=kept, merged=other)
    kept = memory_update(memory=kept, content="Tom plays bass in a trio")
    earlier = Memory.objects.get(current_version=kept)
    for shown in (kept, earlier):  # an earlier version's page shows its current memory's merges
        page = admin_client.get(reverse("admin:lessons_memory_change", args=[shown.pk])).content.decode()
        assert "Merged into this memory" in page and f'data-merged="{other.pk}"' in page
        assert "Lena; Smith, John · proud" in page  # two people, not three
    untouched = memory_create(team=team, content="Nothing merged here")
    assert "Merged into this memory" not in admin_client.get(
        reverse("admin:lessons_memory_change", args=[untouched.pk])).content.decode()
