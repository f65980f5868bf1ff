"""scores."""
