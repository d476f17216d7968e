"""What serves people: benchmarks, MLflow tracking, sampling, the demo, the generated documentation, and the
install's choice of torch."""
