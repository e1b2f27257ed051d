"""MLPerf-style comparison: systems side by side. Rows are (model, image size, precision, ranks);
columns are systems (results directories, then published reference rows). A cell holds the best
throughput of that system for the row (its batch named), and time-to-accuracy where a
convergence run exists. Ratios are the first system's throughput over each other's, as the
report divides (dlbench over its peer); a ratio whose two points' configurations differ beyond
the row (batch, overlap, ...) names the differences, since it then compares more than systems."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .plots.common import device_name
from .outputs import check_output, write_text_atomically
from .records import RecordError, load, read_json_file

REFERENCES_FILE = Path(__file__).resolve().parents[1] / "references.json"


@dataclass
class Cell:
    throughput: float | None = None
    batch: int | None = None
    tta_s: float | None = None
    tta_note: str = ""
    source: str = ""
    config: dict = field(default_factory=dict)  # the best point's, beyond the row and system


@dataclass
class System:
    name: str
    kind: str  # "measured" or "reference"
    cells: dict[tuple, Cell] = field(default_factory=dict)
    source: str = ""


def row_key(model, image_size, precision, ranks) -> tuple:
    """A row: image_size 0 where the record has none (config.image_size null: the schema allows
    it), shown as "?px"."""
    return (model, int(image_size or 0), precision, int(ranks))


def time_to_accuracy(conv: dict | None) -> float | None:
    """metrics.convergence's time to accuracy when the run reached its target and recorded the
    time (the schema allows null), else None."""
    if not conv or not conv.get("reached"):
        return None
    return conv.get("time_to_accuracy_s")


def system_name(r) -> str:
    """Who trained the point, and how: steps replayed from a CUDA graph are a system of their
    own ("dlbench cuda-graph"), never the best of one cell with the steps run op by op."""
    return r.system + (" cuda-graph" if r.config.get("cuda_graph") else "")


def systems_from_dir(directory: str) -> list[System]:
    """One system per config.system in the directory (dlbench first, then dlbench with
    --cuda-graph, then each peer that ran beside it), so that a sweep with a system or a
    cuda_graph axis compares its systems point by point."""
    rs = load(directory)
    names = ["dlbench"] + [s for s in dict.fromkeys(system_name(r) for r in rs.records)
                           if s != "dlbench"]
    out = []
    for name in names:
        records = [r for r in rs.records if system_name(r) == name]
        if not records and name == "dlbench" and len(names) > 1:
            continue
        out.append(system_from_records(directory, name, records, len(names) > 1))
    return out


def system_from_records(directory: str, name: str, records: list, tagged: bool) -> System:
    ok = [r for r in records if r.ok]
    devices = sorted({device_name(r) for r in ok}) or ["?"]
    note = "" if ok else "; no point ended ok"
    tag = f" {name}" if tagged else ""
    system = System(f"{Path(directory).name}{tag} ({', '.join(devices)})", "measured",
                    source=str(Path(directory) / "results.jsonl") + note)
    for r in ok:
        c = r.config
        key = row_key(c["model"], c.get("image_size", 0), c.get("precision", "fp32"), c["ranks"])
        cell = system.cells.setdefault(key, Cell())
        # A point trained to an accuracy may have no throughput of timed steps: its time to
        # accuracy still counts.
        t = r.get("metrics.throughput_img_s")
        if t is not None and (cell.throughput is None or t > cell.throughput):
            cell.throughput, cell.batch = t, c["batch"]
            cell.config = dict(c)
        conv = r.get("metrics.convergence")
        tta = time_to_accuracy(conv)
        if tta is not None:
            if cell.tta_s is None or tta < cell.tta_s:
                cell.tta_s = tta
                cell.tta_note = f"to {100 * conv['target_accuracy']:.1f}% test accuracy (digits)"
    return system


# What a row or a column already says, and what does not change the work timed.
NOT_COMPARED = {"model", "image_size", "precision", "ranks", "system", "cuda_graph", "seed"}


def differences(a: dict, b: dict) -> list[str]:
    """'batch 256/128' for each key both configurations have and disagree on."""
    return [f"{k} {a[k]}/{b[k]}" for k in sorted(set(a) & set(b))
            if k not in NOT_COMPARED and a[k] != b[k]]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_reference_row(row: dict, where: str) -> None:
    """RecordError naming the key of a reference row whose value the table cannot use."""
    for k in ("source_name", "system", "model", "precision", "source"):
        if not isinstance(row[k], str):
            raise RecordError(f"{where}: '{k}' must be a string")
    for k in ("image_size", "ranks"):
        if not isinstance(row[k], int) or isinstance(row[k], bool) or not 0 < row[k] < 2**63:
            raise RecordError(f"{where}: '{k}' must be a positive integer")
    for k in ("throughput_img_s", "time_to_accuracy_s"):
        if k in row and not (_is_number(row[k]) and row[k] > 0):
            raise RecordError(f"{where}: '{k}' must be a positive number")
    if "batch" in row and (not isinstance(row["batch"], int) or isinstance(row["batch"], bool)):
        raise RecordError(f"{where}: 'batch' must be an integer")
    if "target" in row and not isinstance(row["target"], str):
        raise RecordError(f"{where}: 'target' must be a string")


def reference_systems(path: str | Path) -> list[System]:
    path = Path(path)
    data = read_json_file(path, "reference rows")
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise RecordError(f"{path}: expected an object whose 'rows' is a list of objects")
    systems: dict[str, System] = {}
    for i, row in enumerate(rows, start=1):
        for k in ("source_name", "system", "model", "image_size", "precision", "ranks", "source"):
            if k not in row:
                raise RecordError(f"{path}: reference row {i} has no '{k}'")
        check_reference_row(row, f"{path}: reference row {i}")
        name = f"{row['source_name']}: {row['system']}"
        s = systems.setdefault(name, System(name, "reference", source=row["source"]))
        cell = s.cells.setdefault(row_key(row["model"], row["image_size"], row["precision"],
                                          row["ranks"]), Cell(source=row["source"]))
        cell.throughput = row.get("throughput_img_s", cell.throughput)
        cell.batch = row.get("batch", cell.batch)
        if "time_to_accuracy_s" in row:
            cell.tta_s = row["time_to_accuracy_s"]
            cell.tta_note = "to " + row.get("target", "the benchmark's target")
    return list(systems.values())


def check_common_rows(directories: list[str], by_dir: list[list[System]]) -> None:
    """RecordError when no row with a throughput is in two of the directories: there is nothing
    to compare (published rows alone may match nothing: they are context; one directory's peer
    rows may too, and are shown as they are)."""
    rows = [{k for s in systems for k, c in s.cells.items() if c.throughput is not None}
            for systems in by_dir]
    if not any(sum(k in r for r in rows) >= 2 for k in set().union(*rows)):
        have = "; ".join(f"{d}: " + (", ".join(
            f"{k[0]} {k[1]}px {k[2]} x{k[3]}" for k in sorted(r)) or "no ok point")
            for d, r in zip(directories, rows))
        raise RecordError("compare: the results share no (model, image size, precision, ranks) "
                          f"row, so nothing can be compared ({have})")


def compare(directories: list[str], references: str | None = None) -> tuple[list[str], list]:
    by_dir = [systems_from_dir(d) for d in directories]
    if len(directories) > 1:
        check_common_rows(directories, by_dir)
    systems = [s for systems in by_dir for s in systems]
    if references:
        systems += reference_systems(REFERENCES_FILE if references == "default" else references)
    rows = sorted({k for s in systems for k in s.cells})
    header = ["model", "image", "precision", "ranks"]
    for i, s in enumerate(systems):
        header.append(f"[{i + 1}] img/s")
        if i > 0:
            header.append(f"[1]/[{i + 1}]")
    header.append("time to accuracy")
    table = []
    base = systems[0]
    for key in rows:
        line = [key[0], f"{key[1] or '?'}px", key[2], str(key[3])]
        for i, s in enumerate(systems):
            cell = s.cells.get(key)
            if cell and cell.throughput is not None:
                line.append(f"{cell.throughput:,.1f}" + (f" (b{cell.batch})" if cell.batch else ""))
            else:
                line.append("-")
            if i > 0:
                b = base.cells.get(key)
                if cell and cell.throughput and b and b.throughput:
                    differ = differences(b.config, cell.config)
                    line.append(f"{b.throughput / cell.throughput:.3g}x" +
                                (f" (differ: {', '.join(differ)})" if differ else ""))
                else:
                    line.append("-")
        ttas = [f"[{i + 1}] {s.cells[key].tta_s:.1f} s {s.cells[key].tta_note}"
                for i, s in enumerate(systems) if key in s.cells and s.cells[key].tta_s]
        line.append("; ".join(ttas) or "-")
        table.append(line)
    legend = [f"[{i + 1}] {s.name} ({s.kind}; {s.source})" for i, s in enumerate(systems)]
    return header, table, legend


def to_markdown(header, table, legend) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in table]
    out += ["", "Systems:", *[f"- {s}" for s in legend],
            "", "[1]/[n]: system 1's images/s over system n's (above 1: system 1 is faster), as "
            "the report's 'vs' columns divide. A ratio followed by 'differ:' compares points "
            "whose configurations differ beyond the row (each system's best batch, say), so it "
            "measures more than the systems.",
            "", "Rows that differ in model, image size, precision or ranks are not comparable; a "
            "published row matches a measured one only when all four agree."]
    return "\n".join(out) + "\n"


def main(directories: list[str], references: str | None, out: str | None) -> int:
    if out:
        check_output(out, "--out")  # before the comparison, as the C++ side checks its outputs
    header, table, legend = compare(directories, references)
    text = to_markdown(header, table, legend)
    print(text, end="")
    if out:
        write_text_atomically(out, text)
    return 0
