"""Lists are pages of `limit` rows (1..100, 20 by default) from `offset`; `count` is the total."""

from ninja.pagination import LimitOffsetPagination

from lessons.api.schemas import PageQuery
from lessons.search.types import MAX_LIMIT


class Pages(LimitOffsetPagination):
    class Input(PageQuery):
        pass

    def __init__(self, **kwargs):
        super().__init__(max_limit=MAX_LIMIT, **kwargs)
