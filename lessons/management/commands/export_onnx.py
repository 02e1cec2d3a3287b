"""`manage.py export_onnx`: export the bundled model to ONNX once, verified against torch.

`make install` runs it, so searches (server, CLI, MCP) load the graph with ONNX Runtime and never
import torch. Safe to run again: a graph whose checksum matches is left alone unless --force.
"""

from django.core.management.base import BaseCommand, CommandError

from lessons.embedding import get_embedding_backend
from lessons.embedding.backends import SentenceTransformerBackend
from lessons.embedding.onnx_queries import OnnxExportError, OnnxGraphError, export_graph, load_encoder


class Command(BaseCommand):
    help = "Export the embedding model to ONNX for search queries, verify it against torch, store its checksum."
    requires_system_checks = []  # part of the install; needs no database

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="Export again even if a verified graph exists.")

    def handle(self, *args, force, **options):
        backend = get_embedding_backend()
        if not isinstance(backend, SentenceTransformerBackend):
            self.stdout.write(f"Nothing to export: the backend {type(backend).__name__} has no ONNX graph.")
            return
        path = backend.onnx_path
        if not force:
            try:
                load_encoder(model_dir=backend.model_dir, path=path, threads=1)
                self.stdout.write(f"ONNX graph up to date (checksum verified): {path}")
                return
            except OnnxGraphError:
                pass  # missing or damaged: export below
        backend._load_model()
        if backend._model is None:
            raise CommandError(backend._load_error or "the embedding model failed to load")
        try:
            result = export_graph(model=backend._model, model_dir=backend.model_dir, path=path)
        except OnnxExportError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            f"Exported {path} (sha256 {result.sha256[:16]}..., largest difference from torch "
            f"{result.max_difference:.1e} on the probe texts)."
        )
