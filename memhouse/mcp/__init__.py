"""The agent surfaces over MCP: the tools (tools.py), the stdio server (server.py) and the
Streamable HTTP transport at /mcp/ (http.py).
"""
