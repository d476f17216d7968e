"""blocklab: ablate a small character-level Transformer's block and see what each ingredient does."""
