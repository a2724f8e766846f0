"""The Redis store on redis-py: :mod:`.store` and the aggregate parts of its transaction."""
