"""The documentation: pages build, links exist, every command shown runs."""
