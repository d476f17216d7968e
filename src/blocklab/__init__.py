"""blocklab: ablate a small character-level Transformer's block and see what each ingredient does."""

from blocklab.run.numerics import pin

pin()  # the CPU's numeric path, fixed before torch loads (blocklab.run.numerics)
