"""MobiDFL core: the Mesa model, its configuration, learning engine and exchange policies."""
