"""The A/B harness: a worker process runs the arms, the parent holds the verdict, statistics and results file."""
