"""Writes a PEFT LoRA adapter as PEFT itself saves it, for the opt-in parity test
`tests/lora.rs::an_adapter_saved_by_peft_gives_peft_logits`.

usage: peft_adapter.py OUT_DIR
  OUT_DIR/base      a tiny random Llama, saved by transformers (`save_pretrained`)
  OUT_DIR/adapter   LoRA on every linear layer (`all-linear`), rsLoRA, random B, saved by PEFT
  OUT_DIR/logits.json  {"ids": [...], "logits": [[...], ...]} of the adapted model, fp32

needs: torch, transformers, peft
"""

import json
import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    out = Path(sys.argv[1])
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )
    base = LlamaForCausalLM(config).eval()
    base.save_pretrained(out / "base")
    adapter = LoraConfig(
        r=4, lora_alpha=8, target_modules="all-linear", use_rslora=True, lora_dropout=0.0
    )
    model = get_peft_model(base, adapter).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    model.save_pretrained(out / "adapter")
    ids = [1, 5, 9, 12, 40, 63, 2]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].tolist()
    (out / "logits.json").write_text(json.dumps({"ids": ids, "logits": logits}))


if __name__ == "__main__":
    main()
