"""The write path: transcripts -> messages (``parse``) -> turns -> entries."""
