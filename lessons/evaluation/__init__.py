"""Retrieval evaluation on public benchmarks in the BEIR layout (`manage.py eval_retrieval`).

beir.py reads a dataset, loading.py puts its corpus into a team of its own through the services,
runner.py sends every judged query through `lessons.search.search` and metrics.py scores the
rankings the way trec_eval does. output_files.py writes the measuring commands' `--json` and
`--hits` files: whole or not at all, and never over a file the run reads.
"""
