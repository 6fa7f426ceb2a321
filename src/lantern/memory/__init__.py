"""Layered memory (DESIGN §5): retrieval triggers; context assembly and fact versioning to come."""
