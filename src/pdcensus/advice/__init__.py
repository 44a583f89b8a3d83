"""advice package."""
