"""MobiDFL beside the authors' own code (validation/)."""
