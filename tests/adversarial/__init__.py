"""Adversarial tests (issue 10): each performs an attack or a fault through the real command."""
