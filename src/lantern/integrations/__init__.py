"""Integrations: where conversations happen. ``mcp`` (MCP stdio server, extra ``mcp``) and ``proxy`` (REST API,
extra ``proxy``) both call the JSON-shaped operations of ``service.MemoryService``."""
