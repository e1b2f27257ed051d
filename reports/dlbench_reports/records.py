"""Reading result records (results.jsonl) with errors that name the file and the line.

A results directory is what `dlbench --suite=...` writes: results.jsonl (one record per line),
summary.json, traces/, profiles/, points/, logs/, mllog/. Every record is validated against
suites/schema/result.schema.json; anything a report needs beyond the schema is asked for through
`Record.need`, which names the file, the line and the missing key.

The reader is strict, since records come back from other machines and other tools: a line must be
UTF-8 (a byte-order mark at its start is skipped, as the C++ reader skips it), JSON nested at most
MAX_DEPTH levels (checked by a scan without recursion, before parsing), with no NaN or Infinity
literals (JSON has none; Python's json module accepts them) nor a number beyond a double (1e999,
an integer of 400 digits), and valid against the schema, which types every metric (byte counts
are integers in [0, 2^63), throughputs and step times are positive). Anything else is a
RecordError naming the file and the line; the command lines print it as one line and exit 2.
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable


ROOT = Path(__file__).resolve().parents[2]
RESULT_SCHEMA = ROOT / "suites" / "schema" / "result.schema.json"
MAX_DEPTH = 64  # as the C++ readers (runtime/io/json_text.h)
# The most bytes a report reads from one file (records, traces, micro.json): the largest real ones
# are a few MiB, and a path a record names may be anything (/dev/zero, a FIFO, a disk image).
MAX_FILE_BYTES = 256 * 2**20


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
    def system(self) -> str:
        """Who trained the point: "dlbench", or a peer (reports/peers/) such as "pytorch".
        Records written before the key existed are dlbench's."""
        return self.data["config"].get("system", "dlbench")

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


def _validator():
    import jsonschema  # here, not at the top: the triage table reads files on machines without it
    schema = json.loads(RESULT_SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


# A JSON string, to its closing quote or to the end of a text that never closes it; and a run of
# characters that are not brackets.
_STRING = re.compile(r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKETS = re.compile(r'[^\[\]{}]+')


def check_depth(text: str, where: str) -> None:
    """RecordError when an array or object nests deeper than MAX_DEPTH (brackets in strings do not
    count). A scan, not recursion: json.loads and jsonschema recurse, and would raise
    RecursionError on deep input. Strings and all but the brackets are dropped first (regular
    expressions, in C), so that a file of 50 MB takes a fraction of a second."""
    depth = 0
    for c in _NOT_BRACKETS.sub("", _STRING.sub("", text)):
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise RecordError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
        else:
            depth -= 1


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a number")  # 1e999 parses as inf
    return value


def _double_int(text: str) -> int:
    """An integer literal that a double holds (to +-1.8e308): nlohmann, the C++ side's parser,
    refuses a larger one as a number overflow, and every report that divides or draws it would
    fail converting it to a float."""
    value = int(text)
    try:
        float(value)
    except OverflowError:
        raise ValueError(f"{text[:20]}... is too large for a number") from None
    return value


# A UTF-8 byte-order mark, as a text starts with it once decoded. nlohmann::json::parse skips
# one at the start of what it parses, and the C++ side parses each line of results.jsonl alone
# (suites/harness/core/results.cpp, parse_results), so it takes one at the start of any line, and of
# any whole JSON file; one only, and only there (after a space it is not JSON).
BOM = "\ufeff"


def parse_json_text(text: str, where: str, allow_non_finite: bool = False) -> Any:
    """One JSON document, strictly: depth-limited, no NaN/Infinity (nor a number too large for a
    double, which Python would read as inf) unless allow_non_finite; RecordError otherwise. A
    byte-order mark at its very start is skipped, as the C++ side's parser skips it."""
    if text.startswith(BOM):
        text = text[len(BOM):]
    check_depth(text, where)
    try:
        if allow_non_finite:
            return json.loads(text)
        return json.loads(text, parse_constant=_no_constants, parse_float=_finite_float,
                          parse_int=_double_int)
    except json.JSONDecodeError as e:
        raise RecordError(f"{where}: not valid JSON: {e.msg} at column {e.colno}") from None
    except (ValueError, RecursionError) as e:
        raise RecordError(f"{where}: not valid JSON: {e}") from None


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _exists(path: Path) -> bool:
    """Path.exists(), False for a path that cannot even be asked about (no permission to search
    a folder on the way, a name too long, a NUL byte): unreadable() then says why."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def unreadable(path: str | Path, limit: int = MAX_FILE_BYTES) -> str | None:
    """Why `path` is not a file a report reads ("no such file", "a FIFO", "512 MiB, over the
    limit of 256 MiB"), or None when it is a regular file within `limit` bytes. Only stats."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.strerror.lower() if e.strerror else "cannot be read"
    except ValueError:  # a NUL byte in the name
        return "not a path (it holds a NUL byte)"
    if not stat.S_ISREG(st.st_mode):
        return f"{_kind_of(st.st_mode)}, not a regular file"
    if st.st_size > limit:
        return f"{st.st_size / 2**20:.0f} MiB, over the limit of {limit / 2**20:.0f} MiB"
    return None


def read_regular_file(path: str | Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; RecordError naming the file
    otherwise. Stats first, then opens without blocking (a FIFO put in its place between the two
    does not hang the reader) and checks the file it opened, and reads at most `limit` + 1 bytes
    (a file that grows past the limit is refused too)."""
    why = unreadable(path, limit)
    if why is not None:
        raise RecordError(f"{path}: cannot read {what}: {why}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise RecordError(f"{path}: cannot read {what}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordError(f"{path}: cannot read {what}: not a regular file")
        try:
            raw = f.read(limit + 1)
        except OSError as e:
            raise RecordError(f"{path}: cannot read {what}: {e.strerror}") from None
    if len(raw) > limit:
        raise RecordError(f"{path}: cannot read {what}: over the limit of "
                          f"{limit / 2**20:.0f} MiB")
    return raw


def read_json_file(path: str | Path, what: str, allow_non_finite: bool = False) -> Any:
    """A whole JSON file another tool may have written (summary.json, a profile, a trace, a
    references file), read as read_records reads a line: a regular file of at most
    MAX_FILE_BYTES. allow_non_finite reads NaN and Infinity (Google Benchmark writes a counter
    that is not finite so) as float values, for the caller to check."""
    path = Path(path)
    raw = read_regular_file(path, what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(f"{path}: {what} is not UTF-8 (byte {e.start})") from None
    return parse_json_text(text, str(path), allow_non_finite)


def read_records(path: str | Path) -> list[Record]:
    """All records of a results.jsonl file (or of DIR/results.jsonl), in file order."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.jsonl"
    if not path.exists():
        raise RecordError(f"{path}: no such file (expected the results.jsonl of a dlbench run)")
    validator = _validator()
    records = []
    raw = read_regular_file(path, "records")
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if number == len(lines):  # bytes after the last newline
            raise RecordError(f"{path}:{number}: partial record (the line has no end; was "
                              "the run interrupted while writing it?)")
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordError(f"{path}:{number}: not UTF-8 (byte {e.start} of the line)") from None
        data = parse_json_text(text, f"{path}:{number}")
        try:
            errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        except RecursionError:
            raise RecordError(f"{path}:{number}: nested too deeply to validate") from None
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
        if _exists(p):
            return p
        parts = p.parts
        for anchor in ("traces", "profiles", "mllog", "points", "logs"):
            if anchor in parts:
                moved = self.directory.joinpath(*parts[parts.index(anchor):])
                if _exists(moved):
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


def baseline_record(record: Record, records: list[Record]) -> Record | None:
    """The 1-rank point that `record`'s scaling efficiency was measured against
    (metrics.scaling_baseline, a point id)."""
    base = record.get("metrics.scaling_baseline")
    for r in records:
        if base is not None and r.get("point.id") == base:
            return r
    return None


def one_rank_throughput(record: Record, records: list[Record]) -> float | None:
    """Throughput of the 1-rank point that `record`'s scaling efficiency was measured against."""
    base = baseline_record(record, records)
    return None if base is None else base.get("metrics.throughput_img_s")


def efficiency(record: Record) -> float | None:
    """Scaling efficiency as the harness recorded it (metrics.scaling_efficiency; docs/metrics.md
    defines it, suites/harness/core/results.cpp computes it): None when the sweep had no 1-rank point
    of the same config."""
    return record.get("metrics.scaling_efficiency") if record.ok else None


def peer_record(record: Record, records: list[Record], peer: str) -> Record | None:
    """`peer`'s ok record at `record`'s point (the suite config but for its system), from the
    same run: None for a peer's own record, or without a pair."""
    if not record.ok or record.system != "dlbench" or "system" not in record.point_config:
        return None
    want = dict(record.point_config, system=peer)
    for r in records:
        if r.ok and r.point_config == want:
            return r
    return None


def peer_ratio(record: Record, records: list[Record], peer: str) -> float | None:
    """dlbench's throughput over `peer`'s at the same point: None without a pair."""
    other = peer_record(record, records, peer)
    if other is None:
        return None
    return record.need("metrics.throughput_img_s") / other.need("metrics.throughput_img_s")


def peers(records: list[Record]) -> list[str]:
    """The peer systems that have records here, in order of appearance."""
    out: list[str] = []
    for r in records:
        if r.system != "dlbench" and r.system not in out:
            out.append(r.system)
    return out


def schema_enum(name: str) -> list[str]:
    """A name list the runtime defines and result.schema.json exports ($defs/enums): lane,
    memory_category, span_category. The reports take them from there, never retype them."""
    return json.loads(RESULT_SCHEMA.read_text())["$defs"]["enums"][name]["enum"]


# The most characters of one value a point's label shows: a suite's values are any JSON, and a
# label goes into every plot's legend, ticks and notes.
MAX_LABEL_VALUE = 40


def label(record: Record, keys: list[str]) -> str:
    def shown(value) -> str:
        text = str(value)
        return text if len(text) <= MAX_LABEL_VALUE else text[:MAX_LABEL_VALUE] + "..."
    return (" ".join(f"{k}={shown(record.point_config.get(k))}" for k in keys
                     if k in record.point_config) or record.config["model"])
