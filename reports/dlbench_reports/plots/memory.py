"""Peak memory per point, stacked by category, with the peak of the total marked. Host memory
(host_swap: swapped activations, config.swap; host_comm: a parameter server's copies, config.sync
async) is not the device's: each is a hatched bar of its own beside the device's stack, and not in
the total."""
from __future__ import annotations

import numpy as np

from ..records import Record, label, schema_enum, varying_keys
from . import common

# The caption under the figure in the report.
NOTE = ("Each point's peak memory, stacked by category, the peak of the total marked; host "
        "memory (swapped activations, a parameter server's copies) is a hatched bar of its own "
        "beside the device's stack, "
        "not in the total.")

CATEGORIES = schema_enum("memory_category")
HOST_CATEGORIES = common.HOST_CATEGORIES


def render(records: list[Record]):
    ok = [r for r in records if r.ok]
    if not ok:
        return None
    keys = varying_keys(ok)
    names = [label(r, keys).replace(" ", "\n") for r in ok]
    fig, ax = common.figure(max(7.0, 1.1 * len(ok) + 3), 5.5)
    x = np.arange(len(ok))
    bottom = np.zeros(len(ok))
    cats = [c for c in CATEGORIES if c not in HOST_CATEGORIES
            and any(r.need("memory.peak_bytes_by_category").get(c, 0) for r in ok)]
    extra = sorted({c for r in ok for c in r.need("memory.peak_bytes_by_category")} - set(cats)
                   - set(CATEGORIES))
    for i, cat in enumerate(cats + extra):
        h = np.array([r.need("memory.peak_bytes_by_category").get(cat, 0) / common.MIB for r in ok])
        ax.bar(x, h, 0.6, bottom=bottom, label=cat, color=f"C{i}", gid=f"category:{cat}")
        bottom += h
    top = max(bottom)
    for k, cat in enumerate(HOST_CATEGORIES):
        h = np.array([r.need("memory.peak_bytes_by_category").get(cat, 0) / common.MIB for r in ok])
        held = h > 0  # points that hold none get no bar (not even an outline at 0)
        if held.any():
            ax.bar(x[held] + 0.38 + 0.16 * k, h[held], 0.14, color="white", edgecolor="0.3",
                   hatch=("///", "\\\\\\")[k % 2], gid=f"host:{cat}",
                   label=f"{cat} (host memory, beside the device's)")
            top = max(top, max(h))
    total = [r.need("memory.peak_bytes_total") / common.MIB for r in ok]
    ax.plot(x, total, "k_", markersize=30, markeredgewidth=2, gid="total_peak",
            label="peak of the total (categories peak at different times)")
    ax.set_xticks(x)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("peak memory (MiB)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"Peak memory by category: {common.describe(ok)}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    common.set_top(ax, max(top, max(total)) * 1.1)
    common.footnote(fig, common.status_note(records))
    return fig
