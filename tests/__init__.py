"""The test suite; shared helpers and fixtures live here, the tests in subfolders."""
