"""Dates as the admin shows them: short, 24-hour, day first. English's own
"Sept. 28, 2025, 11:59 p.m." took five lines in a list column 60 px wide; "28 Sep 2025, 23:59"
breaks where a reader expects it (the admin's history pages already wrote dates this way).
Output formats only: inputs keep Django's."""

DATE_FORMAT = "j M Y"
DATETIME_FORMAT = "j M Y, H:i"
SHORT_DATE_FORMAT = "j M Y"
SHORT_DATETIME_FORMAT = "j M Y, H:i"
TIME_FORMAT = "H:i"
