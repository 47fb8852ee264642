#!/usr/bin/env python3
"""Makes the transformers oracle fixtures under tests/data/oracle (run where PyTorch + transformers are).

For each configuration below: a random-initialised DeepseekV3ForCausalLM or DeepseekV2ForCausalLM
(real MLA widths: kv_lora 512, rope 64, nope 128, v 128), its checkpoint (config.json, bf16
safetensors, a byte-level tokenizer.json), fixed token ids and the logits transformers computes
for them (eager attention, float32, on the CPU, from the same bf16-rounded weights the checkpoint
holds, so the f32 GGUF computes exactly the same function).

    python3 tools/make_oracle_fixtures.py --out DIR [--only NAME ...]

DIR/NAME/ gets: config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
ids.i32 (int32 LE token ids), logits.f32 (float32 LE, n_tokens × n_vocab), info.txt
(key value lines the C++ test reads: n_tokens, n_vocab, splits, agrees, and notes).
The GGUFs beside them are made here with tools/convert_hf_to_gguf.py (docs/ORACLE.md lists the
commands); tests/test_oracle.cpp compares latte's logits with logits.f32.
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

import numpy as np
import torch

N_TOKENS = 160
SPLITS = "130,1,29"  # latte decodes the ids in these pieces (130 >= 128: mode 3 takes its mode-2 path)

BASE = dict(
    hidden_size=64, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2,
    kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
    intermediate_size=192, moe_intermediate_size=96, vocab_size=512,
    rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=4096,
    hidden_act="silu", tie_word_embeddings=False, attention_bias=False, attention_dropout=0.0,
    bos_token_id=0, eos_token_id=1, pad_token_id=None, use_cache=False, initializer_range=0.02,
)

YARN_V3 = dict(type="yarn", rope_type="yarn", factor=40.0, original_max_position_embeddings=4096,
               beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=1.0)

# name -> (arch, overrides, expected to agree with latte, seed of the random weights)
FIXTURES = {
    # DeepSeek-V3 shape: q_lora, sigmoid gating with bias, 4 groups of 4 experts, top-2 groups,
    # top-4 experts, normalised weights × 2.5, one shared expert, YaRN (factor 40, mscale 1).
    "v3_qlora_yarn": ("v3", dict(q_lora_rank=96, n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4,
                                 n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
                                 scoring_func="sigmoid", topk_method="noaux_tc", first_k_dense_replace=1,
                                 max_position_embeddings=163840, rope_scaling=YARN_V3), True, 1344),
    # V3 without q_lora, no rope scaling, no groups, unnormalised sigmoid weights, 2 shared
    # experts, every layer MoE, another rope base.
    "v3_noqlora": ("v3", dict(q_lora_rank=None, n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=2,
                              n_group=1, topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0,
                              scoring_func="sigmoid", topk_method="noaux_tc", first_k_dense_replace=0,
                              rope_theta=50000.0, rope_scaling=None), True, 1028),
    # DeepSeek-V2-Lite shape: no q_lora, softmax gating, greedy top-k, weights × routed_scaling_factor
    # (norm_topk_prob false), 2 shared experts, YaRN frequencies (factor 40) with mscale_all_dim 0
    # and attention_factor 1, where transformers' V2 port and the authors' code agree.
    "v2_lite_yarn": ("v2", dict(q_lora_rank=None, n_routed_experts=16, n_shared_experts=2, num_experts_per_tok=3,
                                n_group=None, topk_group=None, norm_topk_prob=False, routed_scaling_factor=2.0,
                                scoring_func="softmax", topk_method="greedy", first_k_dense_replace=1,
                                max_position_embeddings=163840,
                                rope_scaling=dict(type="yarn", rope_type="yarn", factor=40.0,
                                                  original_max_position_embeddings=4096, beta_fast=32,
                                                  beta_slow=1, mscale=0.0, mscale_all_dim=0.0,
                                                  attention_factor=1.0)), True, 1230),
    # V2 with q_lora (DeepSeek-V2 236B shape), greedy softmax, no rope scaling.
    "v2_qlora": ("v2", dict(q_lora_rank=96, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                            n_group=None, topk_group=None, norm_topk_prob=False, routed_scaling_factor=1.0,
                            scoring_func="softmax", topk_method="greedy", first_k_dense_replace=1,
                            rope_scaling=None), True, 806),
    # The real DeepSeek-V2 YaRN settings (mscale = mscale_all_dim = 0.707): transformers 5.17's V2
    # port multiplies the softmax scale by mscale^2 as the authors' code does, and so does latte.
    "v2_real_yarn": ("v2", dict(q_lora_rank=None, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                                  n_group=None, topk_group=None, norm_topk_prob=False, routed_scaling_factor=1.0,
                                  scoring_func="softmax", topk_method="greedy", first_k_dense_replace=1,
                                  max_position_embeddings=163840,
                                  rope_scaling=dict(type="yarn", rope_type="yarn", factor=40.0,
                                                    original_max_position_embeddings=4096, beta_fast=32,
                                                    beta_slow=1, mscale=0.707, mscale_all_dim=0.707)), True, 1435),
    # ---- known differences ----
    # V2's group_limited_greedy: a group's score is its best expert (V3: the sum of its best two).
    # latte applies V3's rule to every grouped model. Committed (GGUF and logits only) with agrees 0.
    "v2_group_limited": ("v2", dict(q_lora_rank=None, n_routed_experts=16, n_shared_experts=1,
                                      num_experts_per_tok=3, n_group=4, topk_group=2, norm_topk_prob=False,
                                      routed_scaling_factor=1.0, scoring_func="softmax",
                                      topk_method="group_limited_greedy", first_k_dense_replace=1,
                                      rope_scaling=None), False, 1874),
    # V2 with norm_topk_prob true and a scale != 1: transformers' V2 port ignores norm_topk_prob
    # (always weights × routed_scaling_factor). Not committed.
    "x_v2_norm_topk": ("v2", dict(q_lora_rank=None, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=3,
                                  n_group=None, topk_group=None, norm_topk_prob=True, routed_scaling_factor=2.0,
                                  scoring_func="softmax", topk_method="greedy", first_k_dense_replace=1,
                                  rope_scaling=None), False, 1463),
}

BOS, EOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def write_byte_tokenizer(d):
    """A byte-level BPE tokenizer.json with no merges: BOS, EOS, the 256 byte tokens."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: 2 + b for b in range(256)}
    tj = {"version": "1.0",
          "added_tokens": [{"id": 0, "content": BOS, "special": True}, {"id": 1, "content": EOS, "special": True}],
          "model": {"type": "BPE", "vocab": vocab, "merges": []}}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": True, "bos_token": BOS, "eos_token": EOS}, f, ensure_ascii=False)


def make_config(arch, over):
    import transformers
    d = dict(BASE)
    d.update(over)
    if d.get("rope_scaling") is None:
        d.pop("rope_scaling", None)
    cls = transformers.DeepseekV3Config if arch == "v3" else transformers.DeepseekV2Config
    cfg = cls(**d)
    try:
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    return cfg


def init_weights(model, seed, bias_range):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(0.7 + 0.6 * torch.rand(p.shape, generator=g))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))  # bf16-exact: the checkpoint holds these values
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_((bias_range * torch.rand(b.shape, generator=g)).to(torch.bfloat16).to(torch.float32))


def latte_yarn_inv_freq(cfg_dict):
    """The inverse frequencies latte computes (DeepSeek's yarn_find_correction_range + linear ramp)."""
    R = cfg_dict["qk_rope_head_dim"]
    base = cfg_dict.get("rope_theta", 10000.0)
    sc = cfg_dict.get("rope_scaling")
    extra = base ** (-np.arange(0, R, 2, dtype=np.float64) / R)
    if not sc:
        return extra
    f, orig = sc["factor"], sc["original_max_position_embeddings"]

    def corr(nr):
        return R * math.log(orig / (nr * 2 * math.pi)) / (2 * math.log(base))
    low, high = max(0, math.floor(corr(sc["beta_fast"]))), min(R - 1, math.ceil(corr(sc["beta_slow"])))
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(R // 2) - low) / (high - low), 0, 1)
    return (extra / f) * ramp + extra * (1 - ramp)


def make_one(name, out_dir, log):
    import transformers
    arch, over, agrees, seed = FIXTURES[name]
    cfg = make_config(arch, over)
    cls = transformers.DeepseekV3ForCausalLM if arch == "v3" else transformers.DeepseekV2ForCausalLM
    torch.manual_seed(0)
    model = cls(cfg).float().eval()
    init_weights(model, seed, 0.2 if arch == "v3" else 0.0)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    rng = np.random.RandomState(1234)
    ids = np.concatenate([[0], rng.randint(2, BASE["vocab_size"], size=N_TOKENS - 1)]).astype(np.int32)
    torch.set_num_threads(os.cpu_count() or 1)
    with torch.no_grad():
        logits = model(torch.from_numpy(ids.astype(np.int64))[None, :]).logits[0].float().numpy()
    # what transformers did with the rope settings
    rot = getattr(model.model, "rotary_emb", None)
    attn = model.model.layers[0].self_attn
    hf_inv = rot.inv_freq.double().numpy() if rot is not None and hasattr(rot, "inv_freq") else None
    mine = latte_yarn_inv_freq(dict(BASE, **over))
    inv_diff = float(np.max(np.abs(hf_inv - mine) / mine)) if hf_inv is not None else float("nan")
    notes = dict(attn_scaling=getattr(attn, "scaling", None), rope_attention_scaling=getattr(rot, "attention_scaling", None),
                 inv_freq_rel_diff_vs_latte=inv_diff)
    log(f"[{name}] {arch} params={sum(p.numel() for p in model.parameters())} logits max|.|={np.abs(logits).max():.4f} "
        f"notes={notes}")
    model.to(torch.bfloat16).save_pretrained(d)
    if os.path.exists(os.path.join(d, "generation_config.json")):
        os.remove(os.path.join(d, "generation_config.json"))
    write_byte_tokenizer(d)
    ids.tofile(os.path.join(d, "ids.i32"))
    logits.astype("<f4").tofile(os.path.join(d, "logits.f32"))
    with open(os.path.join(d, "info.txt"), "w") as f:
        f.write(f"arch {arch}\nn_tokens {N_TOKENS}\nn_vocab {BASE['vocab_size']}\nsplits {SPLITS}\n")
        f.write(f"agrees {1 if agrees else 0}\ntransformers {transformers.__version__}\ntorch {torch.__version__}\n")
        f.write(f"hf_attn_scaling {notes['attn_scaling']}\nhf_rope_attention_scaling {notes['rope_attention_scaling']}\n")
        f.write(f"hf_inv_freq_rel_diff_vs_latte {inv_diff:.3e}\n")
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        import struct
        (n,) = struct.unpack("<Q", f.read(8))
        keys = sorted(json.loads(f.read(n)).keys())
    log(f"[{name}] saved keys ({len(keys)}): " + ", ".join(k for k in keys if ".layers.1." in k or "layers" not in k))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    import transformers
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "make_fixtures.log"), "w")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()
    log(f"transformers {transformers.__version__} torch {torch.__version__} numpy {np.__version__}")
    ok = True
    for name in (args.only or FIXTURES):
        t0 = time.time()
        try:
            make_one(name, args.out, log)
        except Exception:
            ok = False
            log(f"[{name}] FAILED:\n{traceback.format_exc()}")
        log(f"[{name}] {time.time() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
