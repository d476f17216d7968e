"""Where and when runs train: the plan of a pipeline's runs, the run store that keeps them by key, the local
worker pool, a Dask cluster, and `blocklab prefetch`. None of it changes a run's numbers."""
