"""The usage signal (issue 14): how much agents' reports of using a row should lift it.

    usage = used / (returned + not_helpful + PRIOR) x 0.5 ^ (days since last used / HALF_LIFE)

- `used / (returned + not_helpful + PRIOR)`: the share of the row's appearances in which an agent
  reported using it, shrunk towards 0 by PRIOR phantom appearances, so one lucky use is worth less
  than a steady record (1 of 1: 0.33; 5 of 5: 0.71; 50 of 50: 0.96 with PRIOR 2). A "not helpful"
  report counts as one more appearance without a use: it lowers the share, never below 0.
- the decay: a row nobody has used for HALF_LIFE days counts half as much, and so on.

0 for a row never used, whatever its other counts: with no use recorded, rankings are exactly
those without the signal. The engine adds `weight x usage` to the quality part (capped at 1);
see `with_usage` in `lessons.search.kinds`. A pure function: no database, no settings.
"""

from datetime import datetime

DEFAULT_PRIOR = 2.0
DEFAULT_HALF_LIFE_DAYS = 90.0


def usage_signal(
    *,
    returned: int,
    used: int,
    last_used_at: datetime | None,
    now: datetime | None,
    not_helpful: int = 0,
    prior: float = DEFAULT_PRIOR,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> float:
    """0..1; 0 when the row was never reported used."""
    used = max(0, int(used or 0))
    if used == 0:
        return 0.0
    # `returned` can lag `used` only for rows reported used before counting began; never above 1.
    appearances = max(int(returned or 0), used) + max(0, int(not_helpful or 0))
    share = used / (appearances + max(0.0, prior))
    decay = 1.0
    if last_used_at is not None and now is not None and half_life_days > 0:
        age_days = max(0.0, (now - last_used_at).total_seconds() / 86400.0)
        decay = 0.5 ** (age_days / half_life_days)
    return min(1.0, max(0.0, share * decay))
