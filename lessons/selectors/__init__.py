"""Selectors: the functions that read."""
