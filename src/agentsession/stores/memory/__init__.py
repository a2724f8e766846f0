"""The in-memory store: :mod:`.store`, its tables and the aggregate parts of its transaction."""
