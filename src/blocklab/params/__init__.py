"""params.yaml: its schema (`schema`), what it says when something is wrong (`problems`), the figures it may ask
for (`figures`) and how a map's grid point is named (`cells`). None of it decides a run's numbers: a run's key
hashes its resolved settings (blocklab.run.settings) and the code in blocklab.run, not this package."""
