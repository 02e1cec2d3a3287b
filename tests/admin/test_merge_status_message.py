"""A merge on the lesson duplicates page that keeps a proposal and merges a confirmed lesson into
it confirms the proposal (a merge never hides confirmed knowledge); the message said only
"Merged lesson #202 into #209 ...: frequency 3, confidence 0.50." and not that agents now find it."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from lessons.models import Lesson
from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, lesson

pytestmark = pytest.mark.django_db

DUPLICATES = reverse("admin:lessons_lesson_duplicates")


def _merge(client, *, keep, merged, text_from):
    response = client.post(DUPLICATES, {"action": "merge", "first": keep.pk, "second": merged.pk,
                                        "keep": keep.pk, "text_from": text_from.pk}, follow=True)
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.mark.parametrize("kept_status", ["proposed", "rejected"])
def test_keeping_an_undecided_lesson_over_a_confirmed_one_says_it_is_now_confirmed(admin_client, team, kept_status):
    kept = lesson(team, DOCKER_PIN, status=kept_status, confidence=0.5)
    confirmed = lesson(team, DOCKER_PIN_AGAIN, status="confirmed", confidence=0.4, frequency=2)
    said = _merge(admin_client, keep=kept, merged=confirmed, text_from=kept)
    assert said == [
        f"Merged lesson #{confirmed.pk} into #{kept.pk} “{kept.title}”: frequency 3, confidence 0.50. "
        f"#{kept.pk} was {kept_status} and is now confirmed: agents find it in their searches from now on."]
    assert Lesson.objects.get(pk=kept.pk).status == "confirmed"


@pytest.mark.parametrize(("kept_status", "merged_status"), [("confirmed", "proposed"), ("proposed", "proposed")])
def test_a_merge_that_leaves_the_kept_status_as_it_was_says_nothing_of_it(admin_client, team, kept_status,
                                                                           merged_status):
    kept = lesson(team, DOCKER_PIN, status=kept_status)
    merged = lesson(team, DOCKER_PIN_AGAIN, status=merged_status)
    (said,) = _merge(admin_client, keep=kept, merged=merged, text_from=merged)
    assert said.startswith(f"Merged lesson #{merged.pk} into #{kept.pk} “") and "now" not in said, said
    assert Lesson.objects.get(pk=kept.pk).status == kept_status
