"""The Python side of `cargo xtask bench --vs-trl`: model preparation, reference log-probs, a
matmul peak, and the TRL GRPO job that `agentrl train` is compared with.

Every subcommand prints one JSON object on its last stdout line; xtask reads it.

  prepare  GGUF_DIR GGUF_NAME OUT_DIR   the GGUF as a Hugging Face directory (f32 safetensors)
                                        plus a tiny random Llama with the same tokenizer
  logprobs MODEL_DIR                    per-token log-probs of a fixed batch (f32)
  peak     THREADS [DEVICE]             GFLOP/s of a square matmul, f32 and bf16: 2048x2048 on
                                        the CPU, 8192x8192 on a CUDA device (TF32 off)
  grpo     MODEL_DIR JOB_JSON           TRL GRPOTrainer on the job; per-step seconds and tokens
  versions                              the versions of Python, torch, transformers and TRL
"""

import copy
import json
import math
import os
import re
import sys
import time


def emit(obj):
    print(json.dumps(obj), flush=True)


# ---------------------------------------------------------------------------------------------
# prepare


def prepare(gguf_dir, gguf_name, out_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    smol_dir = os.path.join(out_dir, "smollm2-135m")
    tiny_dir = os.path.join(out_dir, "tiny-llama")
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf_dir, gguf_file=gguf_name, dtype=torch.float32
    )
    # transformers refuses to save a GGUF-loaded model: copy its weights into a plain Llama,
    # whose config must not say "quantized" (Trainer refuses to fine-tune those).
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = LlamaForCausalLM(config)
    plain.load_state_dict(loaded.state_dict())
    plain.to(torch.float32).save_pretrained(smol_dir, safe_serialization=True)
    tokenizer.save_pretrained(smol_dir)

    torch.manual_seed(0)
    tiny_config = LlamaConfig(
        vocab_size=loaded.config.vocab_size,
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=loaded.config.bos_token_id,
        eos_token_id=loaded.config.eos_token_id,
        pad_token_id=loaded.config.pad_token_id,
    )
    tiny_config.rope_parameters = {"rope_type": "default", "rope_theta": 100000.0}
    LlamaForCausalLM(tiny_config).save_pretrained(tiny_dir, safe_serialization=True)
    tokenizer.save_pretrained(tiny_dir)
    emit({"smollm2": smol_dir, "tiny": tiny_dir})


# ---------------------------------------------------------------------------------------------
# logprobs

# The fixed batch whose per-token log-probs both sides must agree on.
FIXED_BATCH = [
    ("Ben has 26 pencils and buys 7 more. How many pencils does Ben have now?",
     "Ben starts with 26 pencils and buys 7, so 26 + 7 = 33.\nAnswer: 33"),
    ("Iris shares 60 marbles equally among 3 friends. How many marbles does each friend get?",
     "Each friend gets 60 / 3 = 20 marbles.\nAnswer: 20"),
    ("What is 12 times 11?", "12 * 11 = 132. Answer: 132"),
    ("Name a prime number larger than 90.", "97 is prime, so the answer is 97."),
]


def fixed_ids(tokenizer, system):
    rows = []
    for question, answer in FIXED_BATCH:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(prompt + answer, add_special_tokens=False)["input_ids"]
        rows.append(ids)
    return rows


def logprobs(model_dir, system):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for ids in fixed_ids(tokenizer, system):
            x = torch.tensor([ids])
            logits = model(x).logits[0, :-1].float()
            logp = torch.log_softmax(logits, dim=-1).gather(1, x[0, 1:, None])[:, 0]
            out.append({"ids": ids, "logprobs": [None] + logp.tolist()})
    emit({"rows": out})


# ---------------------------------------------------------------------------------------------
# peak


def peak(threads, device="cpu", dtypes="f32,bf16"):
    import torch

    torch.set_num_threads(threads)
    # A GPU needs a bigger product to reach its peak; f32 stays f32 there (no TF32), as on
    # agentrl's side.
    n = 8192 if device.startswith("cuda") else 2048
    torch.backends.cuda.matmul.allow_tf32 = False

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    result = {}
    # bf16 only when asked: a CPU without bf16 arithmetic takes minutes for these products.
    wanted = dtypes.split(",")
    for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        if name not in wanted:
            continue
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        for _ in range(3):
            a @ b
        sync()
        best = math.inf
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(4):
                a @ b
            sync()
            best = min(best, (time.perf_counter() - t0) / 4)
        result[name] = 2 * n**3 / best / 1e9
    emit({"gflops": result, "size": n, "device": device})


def versions():
    import platform

    import torch
    import transformers

    try:
        import trl
        trl_version = trl.__version__
    except ImportError:
        trl_version = None
    emit({
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "trl": trl_version,
    })


# ---------------------------------------------------------------------------------------------
# grpo

ANSWER_MARKERS = ("final answer:", "answer:", "####")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def final_answer(message):
    """The dataset env's rule: the rest of the line after the last answer marker, else all."""
    lower = message.lower()
    for marker in ANSWER_MARKERS:
        at = lower.rfind(marker)
        if at >= 0:
            line = message[at + len(marker):].split("\n", 1)[0]
            if line.strip():
                return line.strip()
    return message.strip()


def last_number(text):
    found = NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def reward_of(text, reference, per_char):
    """The job's reward: 1 for the right number (relative tolerance 1e-6) minus `per_char` per
    character written, as `agentrl`'s `outcome` plus `length` (chars, budget 0) terms."""
    given = last_number(final_answer(text))
    expected = float(reference)
    right = given is not None and abs(given - expected) <= 1e-6 * max(abs(expected), 1.0)
    return (1.0 if right else 0.0) - per_char * len(text)


def grpo(model_dir, job_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    with open(job_path) as f:
        job = json.load(f)
    torch.set_num_threads(job["threads"])
    torch.manual_seed(job["seed"])
    device = job.get("device", "cpu")
    # "bf16": TRL's mixed precision (f32 weights and optimiser, bf16 autocast), its usual GPU
    # setting; "f32": f32 throughout, TF32 off.
    bf16 = job.get("dtype", "f32") == "bf16"
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    with open(job["tasks"]) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                reference = record["answer"].rsplit("####", 1)[-1].strip()
                rows.append({
                    "prompt": [
                        {"role": "system", "content": job["system"]},
                        {"role": "user", "content": record["question"]},
                    ],
                    "reference": reference,
                })
    dataset = Dataset.from_list(rows)
    generated = []

    def reward(completions, reference, completion_ids, **_):
        generated.append(sum(len(ids) for ids in completion_ids))
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        return [reward_of(t, r, job["per_char"]) for t, r in zip(texts, reference)]

    class StepClock(TrainerCallback):
        def __init__(self):
            self.seconds = []
            self.t0 = None

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            self.seconds.append(time.perf_counter() - self.t0)

    clock = StepClock()
    batch = job["prompts_per_step"] * job["group_size"]
    config = GRPOConfig(
        output_dir=job["output_dir"],
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        num_generations=job["group_size"],
        max_completion_length=job["max_new_tokens"],
        temperature=job["temperature"],
        top_p=1.0,
        learning_rate=job["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.01,
        adam_beta1=0.9,
        adam_beta2=0.95,
        adam_epsilon=1e-8,
        max_grad_norm=job["grad_clip"],
        beta=0.0,
        num_iterations=1,
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="group",
        max_steps=job["steps"],
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=job["seed"],
        use_cpu=not device.startswith("cuda"),
        bf16=bf16,
        dataloader_num_workers=0,
        gradient_checkpointing=False,
        disable_tqdm=True,
    )
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[clock],
    )
    trainer.train()
    trained = [h.get("num_tokens") for h in trainer.state.log_history if "num_tokens" in h]
    emit({
        "step_seconds": clock.seconds,
        "generated_tokens": generated,
        "input_tokens_cumulative": trained,
        "params": sum(p.numel() for p in model.parameters()),
    })


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    command, args = argv[1], argv[2:]
    if command == "prepare" and len(args) == 3:
        prepare(*args)
    elif command == "logprobs" and len(args) == 2:
        logprobs(*args)
    elif command == "peak" and len(args) in (1, 2, 3):
        peak(int(args[0]), *args[1:])
    elif command == "versions" and not args:
        versions()
    elif command == "grpo" and len(args) == 2:
        grpo(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
