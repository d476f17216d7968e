"""What turns runs into findings and figures: the metrics and seed statistics, the maps, the claims and their
verdicts with intervals, the figures and the summary, and `blocklab diff`."""
