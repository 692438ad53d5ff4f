"""Language-model backends (blocking; the agent layer streams them off the event loop)."""
