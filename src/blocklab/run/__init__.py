"""What decides a run's numbers: its resolved settings' types, the model, the data, the training loop, the
optimizer, the numeric path and what a run records.

Every file of this package is part of each run's key (blocklab.schedule.run_store.code_digest) and, with the
encoded corpus, the only dependency of every train stage (dvc.yaml): change any of them and every run trains
again. Nothing else belongs here: params.yaml's schema and wording (blocklab.params), the readers of a run's files
(blocklab.records) and the general helpers lie outside, and nothing here knows where or when a run trains;
`job.run_job` is one run, start to finish."""
