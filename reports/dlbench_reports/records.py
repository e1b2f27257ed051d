"""Reading result records (results.jsonl) with errors that name the file and the line.

A results directory is what `dlbench --suite=...` writes: results.jsonl (one record per line),
summary.json, traces/, profiles/, points/, logs/, mllog/. Every record is validated against
suites/schema/result.schema.json; anything a report needs beyond the schema is asked for through
`Record.need`, which names the file, the line and the missing key.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
RESULT_SCHEMA = ROOT / "suites" / "schema" / "result.schema.json"


class RecordError(Exception):
    """A malformed, partial or missing record; the message names the file and line."""


@dataclass
class Record:
    data: dict
    path: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def ok(self) -> bool:
        return self.data["status"] == "ok"

    @property
    def config(self) -> dict:
        return self.data["config"]

    @property
    def point_config(self) -> dict:
        """The point as the suite file wrote it (the same keys for ok and failed points), or the
        full config for a record made outside a suite."""
        return self.data.get("suite_config", self.data["config"])

    @property
    def id(self) -> str:
        return self.data["point"]["id"]

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def need(self, dotted: str) -> Any:
        value = self.get(dotted)
        if value is None:
            raise RecordError(f"{self.where}: record of point {self.data['point'].get('id', '?')} "
                              f"(status {self.data['status']}) has no '{dotted}'")
        return value


def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(RESULT_SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def read_records(path: str | Path) -> list[Record]:
    """All records of a results.jsonl file (or of DIR/results.jsonl), in file order."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.jsonl"
    if not path.exists():
        raise RecordError(f"{path}: no such file (expected the results.jsonl of a dlbench run)")
    validator = _validator()
    records = []
    with path.open(encoding="utf-8") as f:
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            if not text.endswith("\n"):
                raise RecordError(f"{path}:{number}: partial record (the line has no end; was "
                                  "the run interrupted while writing it?)")
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}:{number}: not valid JSON: {e.msg} at column "
                                  f"{e.colno}") from None
            errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
            if errors:
                e = errors[0]
                where = "/" + "/".join(str(p) for p in e.absolute_path)
                raise RecordError(f"{path}:{number}: not a dlbench result record: "
                                  f"{e.message} (at {where})")
            records.append(Record(data, path, number))
    if not records:
        raise RecordError(f"{path}: holds no records")
    return records


def latest_per_point(records: Iterable[Record]) -> list[Record]:
    """The last record of each point (a resumed sweep appends a new one), in point order."""
    by_id: dict[str, Record] = {}
    for r in records:
        by_id[r.id] = r
    return sorted(by_id.values(), key=lambda r: (r.data["point"]["index"], r.line))


@dataclass
class ResultSet:
    """One results directory: its records (latest per point) and where it lives."""
    directory: Path
    records: list[Record]

    @property
    def suite(self) -> str:
        return self.records[0].data.get("suite", "?")

    @property
    def ok(self) -> list[Record]:
        return [r for r in self.records if r.ok]

    def resolve(self, path: str) -> Path:
        """A path a record names: absolute, relative to the cwd of the run, or moved with the
        directory (the records were written elsewhere and copied here)."""
        p = Path(path)
        if p.exists():
            return p
        parts = p.parts
        for anchor in ("traces", "profiles", "mllog", "points", "logs"):
            if anchor in parts:
                moved = self.directory.joinpath(*parts[parts.index(anchor):])
                if moved.exists():
                    return moved
        return p


def load(directory: str | Path) -> ResultSet:
    directory = Path(directory)
    if not directory.is_dir():
        raise RecordError(f"{directory}: not a directory (expected a dlbench output directory)")
    return ResultSet(directory, latest_per_point(read_records(directory)))


def varying_keys(records: list[Record]) -> list[str]:
    """Keys of the points' suite configs whose values differ between records, in a stable
    order."""
    keys: list[str] = []
    for r in records:
        for k in r.point_config:
            if k not in keys:
                keys.append(k)
    return [k for k in keys if len({json.dumps(r.point_config.get(k)) for r in records}) > 1]


def one_rank_throughput(record: Record, records: list[Record]) -> float | None:
    """Throughput of the 1-rank point that `record`'s scaling efficiency was measured against
    (metrics.scaling_baseline, a point id)."""
    base = record.get("metrics.scaling_baseline")
    for r in records:
        if base is not None and r.get("point.id") == base:
            return r.get("metrics.throughput_img_s")
    return None


def efficiency(record: Record) -> float | None:
    """Scaling efficiency as the harness recorded it (metrics.scaling_efficiency; docs/metrics.md
    defines it, suites/harness/results.cpp computes it): None when the sweep had no 1-rank point
    of the same config."""
    return record.get("metrics.scaling_efficiency") if record.ok else None


def schema_enum(name: str) -> list[str]:
    """A name list the runtime defines and result.schema.json exports ($defs/enums): lane,
    memory_category, span_category. The reports take them from there, never retype them."""
    return json.loads(RESULT_SCHEMA.read_text())["$defs"]["enums"][name]["enum"]


def label(record: Record, keys: list[str]) -> str:
    return (" ".join(f"{k}={record.point_config.get(k)}" for k in keys if k in record.point_config)
            or record.config["model"])
