"""`GET /health`: public, for load balancers and operators; 503 when the database is down."""

from ninja import Router

from lessons.api.schemas import HealthOut
from lessons.selectors.health import system_health

router = Router(tags=["health"])


@router.get("/health", response={200: HealthOut, 503: HealthOut}, auth=None)
def health(request):
    report = system_health()
    return (503 if report["status"] == "unavailable" else 200), report
