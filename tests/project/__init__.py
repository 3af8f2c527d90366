"""Rules over the whole tree: layers, namespace, scans, the suite's own harness."""
