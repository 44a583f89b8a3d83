"""census package."""
