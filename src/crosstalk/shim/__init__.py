"""`crosstalk mcp`: the shim a harness session starts as an MCP server (docs/dev/mcp-shim.md).

protocol.py speaks MCP over stdio (cheap to start); tools.py holds the seven tools and the agents they bind.
The two meet only through router.ToolRouter.
"""
