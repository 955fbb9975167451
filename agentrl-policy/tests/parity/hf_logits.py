"""Prints Hugging Face transformers' logits for token ids, as JSON, for the parity tests.

usage: hf_logits.py MODEL_DIR IDS [GGUF_FILE] [--dtype f32|bf16]
  MODEL_DIR  a Hugging Face checkpoint directory (config.json + safetensors), or the directory
             of GGUF_FILE when that is given
  IDS        comma-separated token ids of one sequence
  --dtype    the type the model is loaded and run in (default f32); logits are printed as f32
Prints {"shape": [T, V], "logits": [...]} (row-major) on stdout.
"""

import argparse
import json
import sys

import torch
from transformers import AutoModelForCausalLM

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("model_dir")
    parser.add_argument("ids")
    parser.add_argument("gguf_file", nargs="?")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    args = parser.parse_args()
    ids = [int(i) for i in args.ids.split(",")]
    kwargs = {"torch_dtype": DTYPES[args.dtype], "attn_implementation": "eager"}
    if args.gguf_file:
        kwargs["gguf_file"] = args.gguf_file
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, **kwargs).eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    json.dump({"shape": list(logits.shape), "logits": logits.flatten().tolist()}, sys.stdout)


if __name__ == "__main__":
    main()
