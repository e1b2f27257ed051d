"""What a memory technique (config.memory_plan, config.recompute, config.swap) buys and costs
against the naive plan of the same point: peak memory saved, throughput lost, and the largest
batch within the budget of config.max_batch_budget (metrics.max_batch)."""
from __future__ import annotations

import json
import math

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..records import Record
from . import common

TECHNIQUE_KEYS = ("memory_plan", "recompute", "swap")

NOTE = ("Each technique against the naive plan (each tensor its own buffer, nothing recomputed "
        "or swapped) of the same model and settings: memory saved is the fall of the step's "
        "device peak (host memory, host_swap and host_comm, is not in it) and of its activations, cost is the fall of throughput (negative: faster, "
        "within noise unless the intervals say otherwise), and max batch is the largest batch "
        "whose whole step fit the budget.")


def technique(r: Record) -> str:
    parts = [str(r.config.get("memory_plan", "naive"))]
    recompute = str(r.config.get("recompute", "none"))
    swap = str(r.config.get("swap", "none"))
    if recompute != "none":
        parts.append(f"recompute {recompute}")
    if swap != "none":
        parts.append(f"swap {swap}")
    return ", ".join(parts)


def _rest(r: Record) -> str:
    """The point's settings but its technique: what a baseline must share."""
    return json.dumps({k: v for k, v in r.point_config.items() if k not in TECHNIQUE_KEYS},
                      sort_keys=True)


def baseline(r: Record, records: list[Record]) -> Record | None:
    """The ok naive point, nothing recomputed or swapped, with r's other settings (None: there is
    none)."""
    for b in records:
        if (b.ok and b.system == r.system and technique(b) == "naive"
                and _rest(b) == _rest(r)):
            return b
    return None


def _activations(r: Record) -> float:
    return float(r.need("memory.peak_bytes_by_category").get("activations", 0))


def rows(records: list[Record]) -> list[dict]:
    """Per ok point with a baseline: its figures and its changes against the baseline."""
    out = []
    for r in records:
        b = baseline(r, records) if r.ok else None
        if b is None or r.get("metrics.throughput_img_s") is None:
            continue
        peak, base_peak = r.need("memory.peak_bytes_total"), b.need("memory.peak_bytes_total")
        thr, base_thr = r.need("metrics.throughput_img_s"), b.need("metrics.throughput_img_s")
        out.append({
            "record": r, "model": str(r.config.get("model")), "technique": technique(r),
            "peak_mib": peak / common.MIB, "activations_mib": _activations(r) / common.MIB,
            "saved": 1 - peak / base_peak if base_peak else 0.0,
            "activations_saved": (1 - _activations(r) / _activations(b)
                                  if _activations(b) else 0.0),
            "throughput": thr, "cost": 1 - thr / base_thr if base_thr else 0.0,
            "max_batch": r.get("metrics.max_batch.batch"),
            "base_max_batch": b.get("metrics.max_batch.batch"),
            "budget": r.get("metrics.max_batch.budget_bytes"),
        })
    return out


def table(records: list[Record]) -> tuple[list[str], list[list[str]]] | None:
    data = rows(records)
    if not data or all(d["technique"] == "naive" for d in data):
        return None
    header = ["point", "model", "technique", "peak MiB", "saved", "activations MiB",
              "activations saved", "img/s", "throughput cost", "max batch (x naive)"]
    out = []
    for d in data:
        mb, base = d["max_batch"], d["base_max_batch"]
        out.append([
            str(d["record"].data["point"]["index"]), d["model"], d["technique"],
            f"{d['peak_mib']:.1f}", f"{100 * d['saved']:.0f}%", f"{d['activations_mib']:.1f}",
            f"{100 * d['activations_saved']:.0f}%", common.number_text(d["throughput"]),
            f"{common.number_text(100 * d['cost'], '+.0f')}%",
            "" if mb is None else (f"{mb}" + (f" ({mb / base:.1f}x)" if base else "")),
        ])
    return header, out


def render(records: list[Record]):
    data = [d for d in rows(records) if d["technique"] != "naive"]
    if not data:
        return None
    fig, ax = common.figure(9.0, 5.0)
    models = sorted({d["model"] for d in data})
    techniques = sorted({d["technique"] for d in data})
    markers = "osD^v<>"
    undrawn = common.Undrawn()
    xs = []
    for d in data:
        color = f"C{models.index(d['model'])}"
        k = techniques.index(d["technique"])
        x = undrawn.of(d["record"], 100 * d["saved"], "memory saved (%)")
        y = undrawn.of(d["record"], 100 * d["cost"], "throughput cost (%)")
        if math.isnan(x) or math.isnan(y):
            continue
        xs.append(x)
        ax.scatter(x, y, s=60, color=color, marker=markers[k % len(markers)],
                   gid=f"point:{d['model']}:{d['technique']}")
        mb, base = d["max_batch"], d["base_max_batch"]
        if mb is not None and base:
            # Alternately above and below, so that two techniques close together stay legible.
            ax.annotate(f"max batch {mb} ({mb / base:.1f}x)", (x, y),
                        textcoords="offset points", xytext=(7, 5 if k % 2 == 0 else -11),
                        fontsize=7, color=color)
    # The legend: a colour per model, a marker per technique.
    handles = [Patch(color=f"C{i}", label=m) for i, m in enumerate(models)]
    handles += [Line2D([], [], color="0.4", marker=markers[k % len(markers)], linestyle="",
                       label=t) for k, t in enumerate(techniques)]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    ax.axhline(0, color="0.6", linewidth=0.8)
    if xs:
        ax.set_xlim(min(0.0, min(xs)) - 2, max(max(xs) * 1.35, 10))
    ax.set_xlabel("peak memory saved against naive (%)")
    ax.set_ylabel("throughput cost against naive (%)")
    ax.grid(alpha=0.3)
    ax.set_title("Memory saved and throughput paid: "
                 f"{common.describe([d['record'] for d in data])}", fontsize=10)
    common.footnote(fig, common.status_note(records), undrawn)
    return fig
