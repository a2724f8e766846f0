"""Storage adapters behind one protocol (:mod:`agentsession.stores.base`)."""
