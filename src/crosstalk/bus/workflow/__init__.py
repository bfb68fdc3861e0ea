"""Workflows (seed 001): a runtime-managed fan-out to several models and a synthesis, never run by a model."""
