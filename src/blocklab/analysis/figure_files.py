"""How every figure is drawn and saved: matplotlib without a display, and each PNG's title in a text chunk."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402


def save_figure(fig, path: Path, dpi: int = 110) -> Path:
    """The figure as a PNG whose `Title` (a text chunk) is its title as drawn: what a reader, `blocklab diff` or a
    test reads without looking."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    title = fig.get_suptitle() or (fig.axes[0].get_title() if fig.axes else "")
    fig.savefig(path, dpi=dpi, metadata={"Title": title})
    plt.close(fig)
    return path
