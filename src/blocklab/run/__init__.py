"""What decides a run's numbers: its settings, the model, the data, the training loop and what it records.

Every file of this package is part of each run's key (blocklab.schedule.run_store.code_digest) and a
dependency of every train stage (dvc.yaml): change any of them and every run trains again. Nothing here
knows where or when a run trains; `cell.run_cell` is one run, start to finish."""
