"""Re-saves a checkpoint with the installed transformers' `save_pretrained`, for the parity tests.

usage: hf_resave.py MODEL_DIR OUT_DIR [--dtype f32|bf16]
  MODEL_DIR  a Hugging Face checkpoint directory (config.json + safetensors)
  OUT_DIR    where transformers writes it back (config.json as this version writes it, e.g.
             `rope_parameters` in transformers 5), with weights in --dtype (default f32)
"""

import argparse

import torch
from transformers import AutoModelForCausalLM

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("model_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=DTYPES[args.dtype])
    model.save_pretrained(args.out_dir)


if __name__ == "__main__":
    main()
