import pytest

from lessons.models import Lesson
from lessons.selectors.lessons import lessons_for_session, lessons_patterns_for_feature, lessons_relevant

pytestmark = pytest.mark.django_db

AUTH_WORDS = ("auth", "authentication")


def test_patterns_for_authentication_find_auth_lessons_whose_titles_lack_the_word(demo_team):
    response = lessons_patterns_for_feature(team=demo_team, feature="Authentication")
    assert len(response.results) == 3
    for hit in response.results:
        fields = hit.fields
        text = " ".join([fields["title"], fields["description"], fields["recommendation"], " ".join(fields["tags"])]).lower()
        assert any(word in text for word in ("sign", "auth", "session", "password", "token", "login", "oauth")), hit.fields["title"]
    assert any(not any(word in hit.fields["title"].lower() for word in AUTH_WORDS) for hit in response.results)


def test_relevant_lessons_for_a_project_prefer_its_stack_and_respect_the_phase(demo_team):
    response = lessons_relevant(team=demo_team, project_type="saas", tech_stack=["nextjs", "supabase"], limit=15)
    assert len(response.results) == 15 and response.fallback is None
    stacks = [set(hit.fields["tech_stacks"]) for hit in response.results]
    assert sum(1 for s in stacks[:10] if s & {"nextjs", "supabase"}) >= 8

    testing = lessons_relevant(team=demo_team, tech_stack=["django"], phase="testing", limit=15)
    assert testing.results
    assert {hit.fields["category"] for hit in testing.results} <= {"testing", "security", "performance", "workflow"}


def test_relevant_lessons_without_any_project_are_the_recent_ones(demo_team):
    response = lessons_relevant(team=demo_team)
    assert response.fallback == "recency" and len(response.results) == 15


def test_session_start_lessons_follow_the_project_and_activity(demo_team):
    response = lessons_for_session(
        team=demo_team, project="billing-service", cwd="/home/dev/billing-service",
        recent_activity="fixing duplicate Stripe webhook deliveries that credited customers twice",
    )
    assert response.fallback is None and len(response.results) == 5
    assert {"lesson-0001", "lesson-0130"} & {hit.external_id for hit in response.results}


def test_session_start_without_anything_that_qualifies_falls_back_to_recency(demo_team):
    response = lessons_for_session(team=demo_team, project="zzqx", cwd="/tmp/qqvv")
    assert response.fallback == "recency"
    recent = list(Lesson.objects.filter(team=demo_team, status="confirmed").order_by("-updated_at", "-id")[:5])
    assert [hit.id for hit in response.results] == [lesson.id for lesson in recent]
