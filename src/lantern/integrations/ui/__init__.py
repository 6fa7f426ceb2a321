"""The memory inspector: ``lantern ui``, a local web app over one database (app.py; extra ``ui``)."""

from lantern.integrations.ui.app import build_app, serve

__all__ = ["build_app", "serve"]
