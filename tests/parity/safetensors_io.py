"""A small, independent reader and writer of the safetensors format for the parity tests.

Debian ships no `safetensors` package for /usr/bin/python3, so this follows the published format
(8-byte little-endian header length, JSON header, raw little-endian data) with torch tensors.
Being a second implementation, it also checks dlbench's reader and writer against the spec.
"""
import json
import struct

import torch

_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}
_NAMES = {v: k for k, v in _DTYPES.items()}


def save(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        buf = bytearray(data[a:b])
        out[name] = torch.frombuffer(buf, dtype=_DTYPES[e["dtype"]]).reshape(e["shape"]).clone() \
            if b > a else torch.zeros(e["shape"], dtype=_DTYPES[e["dtype"]])
    return out


def metadata(path):
    """The header's __metadata__ (string to string), empty when there is none."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})
