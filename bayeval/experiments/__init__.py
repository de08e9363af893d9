"""Protocols and metrics that reproduce the papers' tables."""
