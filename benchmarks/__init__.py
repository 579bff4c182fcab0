"""Speed benchmarks of the federated engine against conventional implementations (python -m benchmarks.speed)."""
