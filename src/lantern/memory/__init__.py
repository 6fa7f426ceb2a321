"""Layered memory (docs/architecture.md §5): the layered context of a ``Session`` (context.py) and the
retrieval triggers (triggers.py). Versioned facts live in archive/facts.py and store/facts.py."""
