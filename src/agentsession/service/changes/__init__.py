"""State changes the use cases share, run inside a write's transaction.

A use-case module imports these, never another use-case module, so the service layer
has no import cycle even counting the imports made inside functions.
"""
