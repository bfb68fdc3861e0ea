"""A bare Gemini CLI AfterTool hook, the baseline of bench/gemini_delivery.py: it hands the model whatever lines wait
in the file named by its argument as `additionalContext`, as crosstalk's hook hands over what its shim queued, with
nothing of crosstalk's in between (no socket, no record, no crosstalk import)."""

import json
import os
import sys

sys.stdin.read()
path = sys.argv[1] if len(sys.argv) > 1 else ""
text = ""
try:
    with open(path) as f:
        text = f.read()
    os.unlink(path)
except OSError:
    pass
out = {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": text}} if text else {}
print(json.dumps(out))
