"""`crosstalk doctor`: what is wrong with crosstalk on this machine, and what to run to fix it.

Three layers, as in policy/: gather/ reads the machine into plain records (facts.py), each checks/ module is a pure
function from those facts to findings, and diagnose.py composes them. prune.py is `--fix`: it removes only what it
proves dead again, under the owner's lock, at the moment of removal."""
