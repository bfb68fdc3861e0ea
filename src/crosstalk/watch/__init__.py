"""`crosstalk watch`: every agent on this machine, the live traffic and each bus transport's dispatcher, at a glance.

snapshot.py reads the state root and the transports into frozen records (records.py) without any terminal
library; app.py is the textual screen on top, and only `crosstalk watch` imports it.
"""
