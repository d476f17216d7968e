"""How many intra-op threads a piece of torch work uses."""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(threads: int):
    """Run the block with `threads` intra-op threads, then restore the count."""
    before = torch.get_num_threads()
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if threads != before:
            torch.set_num_threads(before)
