"""lafuse."""
