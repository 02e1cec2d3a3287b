"""The agents' JSON API (django-ninja): one router per concern, added to the project's NinjaAPI in
`memory_site/api.py`, where errors are also mapped to answers once for every handler."""
