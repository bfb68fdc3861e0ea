"""The demo behind `crosstalk demo`: a top layer beside cli, which nothing below imports."""
