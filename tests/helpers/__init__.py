"""Helpers shared by test modules (models, drivers, CLIs, metrics), imported by them."""
