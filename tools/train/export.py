#!/usr/bin/env python3
"""Stage 6: writes a trained run as a Hugging Face model directory.

  export.py --run work/runs/target-chat --out work/export/troupe-demo-en --name troupe-demo-en

The directory holds config.json (LlamaForCausalLM, tied embeddings),
generation_config.json, model.safetensors (bf16, transformers' tensor names),
tokenizer.json and tokenizer_config.json: the layout `troupe serve --model`
and transformers' `from_pretrained` both load.
"""

import argparse
import json
import pathlib
import shutil
import sys

import torch
from safetensors.torch import save_file

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from train import load_run  # noqa: E402


def export(run: pathlib.Path, out: pathlib.Path, tokenizer_dir: pathlib.Path, name: str):
    model, _ = load_run(run)
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    bos, eot, eos = ids["<|begin_of_text|>"], ids["<|eot_id|>"], ids["<|end_of_text|>"]
    out.mkdir(parents=True, exist_ok=True)
    config = model.shape.hf_config(bos, [eot, eos])
    config["_name_or_path"] = name
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {"bos_token_id": bos, "eos_token_id": [eot, eos], "do_sample": True, "temperature": 0.7,
                  "top_p": 0.9}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
               if not k.startswith("rope_")}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "model.safetensors").chmod(0o644)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir / f, out / f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=pathlib.Path, required=True)
    ap.add_argument("--out", type=pathlib.Path, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--tokenizer", type=pathlib.Path, default=HERE / "work" / "tokenizer")
    args = ap.parse_args()
    export(args.run, args.out, args.tokenizer, args.name)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
