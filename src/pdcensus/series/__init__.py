"""The aligned sample model, metric profiles, and PromQL-exact series math."""
