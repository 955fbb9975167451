"""Prints Hugging Face transformers' fp32 logits for token ids, as JSON, for the parity tests.

usage: hf_logits.py MODEL_DIR IDS [GGUF_FILE]
  MODEL_DIR  a Hugging Face checkpoint directory (config.json + safetensors), or the directory
             of GGUF_FILE when that is given
  IDS        comma-separated token ids of one sequence
Prints {"shape": [T, V], "logits": [...]} (row-major) on stdout.
"""

import json
import sys

import torch
from transformers import AutoModelForCausalLM


def main() -> None:
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    model_dir, ids = sys.argv[1], [int(i) for i in sys.argv[2].split(",")]
    kwargs = {"torch_dtype": torch.float32, "attn_implementation": "eager"}
    if len(sys.argv) == 4:
        kwargs["gguf_file"] = sys.argv[3]
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(model_dir, **kwargs).eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    json.dump({"shape": list(logits.shape), "logits": logits.flatten().tolist()}, sys.stdout)


if __name__ == "__main__":
    main()
