"""Committed pages and data regenerated and compared with what is published."""
