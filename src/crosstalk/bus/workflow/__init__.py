"""Workflows: a runtime-managed fan-out to several models and a synthesis, never run by a model."""
