#!/usr/bin/env python3
"""A bandwidth-bound stand-in for a trained model: copies a Hugging Face
Llama checkpoint (one model.safetensors) with each MLP widened from
intermediate_size I to I * factor by zero rows of gate_proj / up_proj and
zero columns of down_proj. The added units compute silu(0) * 0 = 0 and add
exact zeros, so the model computes what the original does (its logits equal
up to the summation order of the original terms) while each decode step
reads factor times the MLP's bytes.

Speculative decoding gains most where a step is bound by reading weights
(verifying k + 1 tokens then costs about one step); the demo model's 22 MB
sit in the CPU's caches, so a step there is compute-bound. Widening it keeps
its predictions, and so how often its draft model is accepted, while giving
its steps the cost profile of a model of hundreds of millions of parameters
(docs/benchmarks.md, "Speculative decoding on a bandwidth-bound target").

Usage: tools/bench/widen_model.py SOURCE_DIR OUT_DIR --factor 64
"""

import argparse
import json
import pathlib
import shutil
import struct
import sys

import numpy as np


def read_safetensors(path: pathlib.Path):
    """The header and the raw bytes of each tensor, in file order."""
    data = path.read_bytes()
    (header_length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_length])
    body = data[8 + header_length :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], body[begin:end])
    return header.get("__metadata__"), tensors


def write_safetensors(path: pathlib.Path, metadata, tensors):
    header, offset, chunks = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for chunk in chunks:
            out.write(chunk)


ELEMENT_BYTES = {"BF16": 2, "F16": 2, "F32": 4}


def widened(dtype, shape, raw, name, intermediate, wide):
    """gate/up [I, H] -> [wide, H] with zero rows; down [H, I] -> [H, wide] with zero columns."""
    if dtype not in ELEMENT_BYTES:
        sys.exit(f"{name}: dtype {dtype} is not one this script widens (BF16, F16, F32)")
    as_bytes = np.frombuffer(raw, dtype=np.uint8).reshape(shape[0], shape[1] * ELEMENT_BYTES[dtype])
    if name.endswith(("gate_proj.weight", "up_proj.weight")) and shape[0] == intermediate:
        out = np.zeros((wide, as_bytes.shape[1]), dtype=np.uint8)
        out[:intermediate] = as_bytes
        return [wide, shape[1]], out.tobytes()
    if name.endswith("down_proj.weight") and shape[1] == intermediate:
        out = np.zeros((shape[0], wide * ELEMENT_BYTES[dtype]), dtype=np.uint8)
        out[:, : as_bytes.shape[1]] = as_bytes
        return [shape[0], wide], out.tobytes()
    sys.exit(f"{name}: shape {shape} does not match intermediate_size {intermediate}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--factor", type=int, default=64, help="intermediate_size multiplier (>= 1)")
    args = parser.parse_args()
    if args.factor < 1:
        sys.exit("--factor must be at least 1")
    config = json.loads((args.source / "config.json").read_text())
    intermediate = config["intermediate_size"]
    wide = intermediate * args.factor
    weights = args.source / "model.safetensors"
    if not weights.exists():
        sys.exit(f"{weights}: this script reads a single model.safetensors")
    metadata, tensors = read_safetensors(weights)
    out_tensors = {}
    for name, (dtype, shape, raw) in tensors.items():
        if name.endswith(("gate_proj.weight", "up_proj.weight", "down_proj.weight")):
            shape, raw = widened(dtype, shape, raw, name, intermediate, wide)
        out_tensors[name] = (dtype, shape, raw)
    args.out.mkdir(parents=True, exist_ok=True)
    for item in args.source.iterdir():
        if item.is_file() and item.name not in ("model.safetensors", "config.json"):
            shutil.copy2(item, args.out / item.name)
    config["intermediate_size"] = wide
    config["_name_or_path"] = f"{config.get('_name_or_path', args.source.name)}-widened-x{args.factor}"
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(args.out / "model.safetensors", metadata, out_tensors)
    print(f"{args.out}: intermediate_size {intermediate} -> {wide}")


if __name__ == "__main__":
    main()
