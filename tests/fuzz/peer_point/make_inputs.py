#!/usr/bin/env python3
"""Writes the point files of the PyTorch peer's fuzz target (tests/fuzz/peer_point): the seeds
written by hand (corpus/; corpus/harness_point.json is the harness's own, kept as it wrote it)
and one regression input per defect found (regressions/). Each regression input is refused by
`pytorch_train.py --point=FILE` with one line naming the file and the key and exit 2, except those
named accepted_*, which must be accepted. Deterministic.

    python3 tests/fuzz/peer_point/make_inputs.py
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESS = json.loads((HERE / "corpus" / "harness_point.json").read_text())


def write(folder: str, name: str, data) -> None:
    text = data if isinstance(data, str) else json.dumps(data, indent=2, sort_keys=True) + "\n"
    (HERE / folder / name).write_text(text)


def point(**changes) -> dict:
    """The harness's point with its resolved config changed."""
    p = json.loads(json.dumps(HARNESS))
    p["resolved"].update(changes)
    return p


def main() -> None:
    # The parity test's point (tests/parity/torch_parity.py): a fixed batch and initial weights,
    # data "batch-file"; and one written by hand with only some keys (tests/integration/peers.sh).
    write("corpus", "parity_point.json", {"record": "/tmp/parity/peer_record.json", "resolved": {
        "system": "pytorch", "model": "resnet18", "batch": 4, "image_size": 32, "num_classes": 1000,
        "precision": "fp32", "backend": "cpu", "steps": 3, "warmup": 0, "lr": 0.01,
        "momentum": 0.9, "weight_decay": 0.0001, "dropout": 0.0, "seed": 0, "ranks": 1,
        "data": "batch-file", "init": "/tmp/parity/init.safetensors",
        "batch_file": "/tmp/parity/batch.safetensors"}})
    write("corpus", "by_hand_point.json", {"record": "graph-point.json.record", "resolved": {
        "model": "resnet18", "batch": 2, "image_size": 32, "num_classes": 10, "steps": 1,
        "warmup": 0, "backend": "cpu", "precision": "fp32", "ranks": 1, "cuda_graph": True}})

    bad = "regressions"
    write(bad, "batch_a_string.json", point(batch="2"))  # was a traceback, and no record
    write(bad, "batch_0.json", point(batch=0))  # trained on nothing; an invalid record
    write(bad, "backend_CPU.json", point(backend="CPU"))  # echoed into an ok record
    write(bad, "bucket_mb_minus_1.json", point(bucket_mb=-1))  # echoed into an ok record
    write(bad, "batch_2_0.json", point(batch=2.0))  # an integer must be a JSON integer
    write(bad, "seed_2_to_64.json", point(seed=2**64))
    write(bad, "steps_2_to_63.json", point(steps=2**63))
    write(bad, "unknown_key.json", point(bach=2))
    write(bad, "lr_infinity.json", json.dumps(point(lr=float("inf"))))  # Infinity: not JSON
    write(bad, "lr_1e999.json", json.dumps(point(lr=1.0)).replace('"lr": 1.0', '"lr": 1e999'))
    write(bad, "resolved_a_list.json", {"record": "r.json", "resolved": [1]})
    write(bad, "no_record.json", {"resolved": HARNESS["resolved"]})
    write(bad, "nested_100000_deep.json", "[" * 100000 + "]" * 100000)
    write(bad, "init_a_number.json", point(init=5))
    write(bad, "data_batch_file_without_one.json", point(data="batch-file"))
    write(bad, "accepted_nulls_not_set.json", point(dropout=None, loss_scale=None, comm=None))
    # Accepted, but its record held "backend": null, which the result schema refuses.
    write(bad, "accepted_backend_null.json", point(backend=None, comm_progress=None))


if __name__ == "__main__":
    main()
