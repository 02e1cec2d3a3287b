"""Lists are pages of `limit` rows (1..100, 20 by default) from `offset`; `count` is the total."""

from ninja import Field, Schema
from ninja.pagination import LimitOffsetPagination

from lessons.api.schemas import MAX_ID
from lessons.search.types import MAX_LIMIT

DEFAULT_PAGE_SIZE = 20


class Pages(LimitOffsetPagination):
    class Input(Schema):
        limit: int = Field(DEFAULT_PAGE_SIZE, ge=1, le=MAX_LIMIT, description=f"Rows per page, 1..{MAX_LIMIT}.")
        offset: int = Field(0, ge=0, le=MAX_ID, description="Rows to skip.")

    def __init__(self, **kwargs):
        super().__init__(max_limit=MAX_LIMIT, **kwargs)
