"""Generative models of scores, each a NumPyro model function plus its prior settings."""
