"""The project's one NinjaAPI; each concern of the `lessons` app adds its router here."""

from ninja import NinjaAPI

api = NinjaAPI(title="Memory Store API", version="1.0.0", urls_namespace="api-v1")
