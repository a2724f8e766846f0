"""The SQL store on SQLAlchemy Core: :mod:`.store`, its schema, dialects and aggregate parts."""
