"""One pure check per module: a function from gathered facts (doctor/facts.py) to findings. None reads the
machine; doctor/diagnose.py calls them in order."""
