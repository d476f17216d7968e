"""Benchmarks, one module each (`blocklab bench`). Every figure is a ratio measured within one run, because the
machines are shared and noisy."""
