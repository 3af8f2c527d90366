"""Paper experiments: one script per seed paper, each with run(scale=, seeds=) and main()."""
