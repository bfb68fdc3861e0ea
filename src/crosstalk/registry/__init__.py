"""Descriptors, locks, names and discovery of crosstalk agents on this machine.

Submodules are imported directly (``from crosstalk.registry.discovery import resolve``): this package imports
nothing eagerly, so ``crosstalk send`` pays only for the modules it uses.
"""
