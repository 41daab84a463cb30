"""Continuous-unit models (units learned inside a network) and segments read off their attention."""
