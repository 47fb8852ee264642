#!/usr/bin/env python3
"""Trains latte's tiny English demo model: a DeepSeek-V3-architecture model (transformers'
DeepseekV3ForCausalLM: MLA with the real widths 512/64/128/128, q_lora, sigmoid-gated MoE with a
shared expert and group-limited routing) on Jane Austen's novels, with a byte-level BPE vocabulary
trained on the same text. Runs in one call on a machine with a GPU, PyTorch, transformers and
tokenizers; prints how long it took and on what.

    python3 tools/extract_austen.py r-cran-janeaustenr_*.deb -o austen.txt   # the text (Debian package)
    python3 tools/train_tiny.py --corpus austen.txt --out OUTDIR [--minutes 5]

OUTDIR gets: ckpt/ (config.json, f16 safetensors shards, tokenizer.json, tokenizer_config.json),
heldout.txt (the held-out text), heldout.i32 (its ids, BOS first: what both engines score),
train_log.json (device, time, steps, losses, held-out perplexities, sample generations).
Convert with: python3 tools/convert_hf_to_gguf.py OUTDIR/ckpt -o latte-tiny-en.gguf --outtype f16

Held-out text: the last 4% of the paragraphs of each novel (never trained on). Expert balance:
DeepSeek-V3's auxiliary-loss-free rule (after each step, each expert's e_score_correction_bias
moves by ±gamma towards the mean load).
"""
import argparse
import json
import math
import os
import platform
import random
import time

import numpy as np
import torch

BOS, EOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"
# DeepSeek-V3's pre-tokenizer (its tokenizer.json): three regex splits, then byte-level mapping.
PRE_SPLITS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
]


def model_config(vocab):
    import transformers
    return transformers.DeepseekV3Config(
        vocab_size=vocab, hidden_size=192, intermediate_size=512, moe_intermediate_size=192,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=96, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=4, topk_group=2,
        norm_topk_prob=True, routed_scaling_factor=2.5, scoring_func="sigmoid", topk_method="noaux_tc",
        first_k_dense_replace=1, max_position_embeddings=2048, rope_theta=10000.0,
        rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=False, initializer_range=0.02,
        bos_token_id=0, eos_token_id=1, use_cache=False, attention_dropout=0.0)


def build_tokenizer(train_text, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in PRE_SPLITS] +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS], min_frequency=2,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train_text.split("\n\n"), trainer=tr)
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=5.0, help="training time budget")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--heldout-tokens", type=int, default=1024)
    ap.add_argument("--dropout", type=float, default=0.15, help="residual dropout (training only)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t_start = time.time()
    import transformers
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device_name = torch.cuda.get_device_name(0) if dev.type == "cuda" else platform.processor()
    log = {"device": device_name, "torch": torch.__version__, "transformers": transformers.__version__,
           "args": vars(args), "evals": []}
    print(f"train_tiny: {device_name}, torch {torch.__version__}, transformers {transformers.__version__}", flush=True)

    # ---- text: novels, paragraphs; the last 4% of each novel's paragraphs are held out ----
    text = open(args.corpus, encoding="utf-8").read()
    novels = [n for n in text.split("\n\n\n") if n.strip()]
    train_parts, held_parts = [], []
    for n in novels:
        paras = [p for p in n.split("\n\n") if p.strip()]
        k = int(len(paras) * 0.96)
        train_parts.append("\n\n".join(paras[:k]))
        held_parts.append("\n\n".join(paras[k:]))
    train_text = "\n\n\n".join(train_parts)
    tok = build_tokenizer(train_text, args.vocab)
    V = tok.get_vocab_size()
    t_tok = time.time() - t_start
    print(f"tokenizer: {V} tokens in {t_tok:.1f} s", flush=True)
    bos_id, eos_id = tok.token_to_id(BOS), tok.token_to_id(EOS)
    train_ids = []
    for part in train_parts:
        train_ids.append(bos_id)
        train_ids.extend(tok.encode(part).ids)
    train_ids = torch.tensor(train_ids, dtype=torch.long)
    # held-out: the first held-out passage long enough, cut at a token boundary
    held_text = held_parts[-1]
    enc = tok.encode(held_text)
    n_h = args.heldout_tokens - 1
    assert len(enc.ids) >= n_h, len(enc.ids)
    cut = enc.offsets[n_h - 1][1]
    held_text = held_text[:cut]
    held_ids = [bos_id] + tok.encode(held_text).ids
    assert len(held_ids) == args.heldout_tokens, (len(held_ids), args.heldout_tokens)
    val_ids = []
    for part in held_parts[:-1]:
        val_ids.append(bos_id)
        val_ids.extend(tok.encode(part).ids)
    val_ids = torch.tensor(val_ids, dtype=torch.long)
    log.update(n_train_tokens=int(train_ids.numel()), n_val_tokens=int(val_ids.numel()),
               chars_per_token=len(train_text) / train_ids.numel())
    print(f"train tokens {train_ids.numel()}, val tokens {val_ids.numel()}, "
          f"{log['chars_per_token']:.2f} chars/token", flush=True)

    # ---- model ----
    cfg = model_config(V)
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:
        pass
    model = transformers.DeepseekV3ForCausalLM(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log["n_params"] = n_params
    print(f"model: {n_params / 1e6:.2f} M parameters", flush=True)
    gates = [l.mlp.gate for l in model.model.layers if hasattr(l.mlp, "gate")]
    loads = {}

    def hook(mod, inp, out):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        idx = next((o for o in outs if torch.is_tensor(o) and not o.is_floating_point()), None)
        if idx is None:  # a router that returns logits only: approximate its choice (groups ignored)
            lg = next(o for o in outs if torch.is_tensor(o)).float().reshape(-1, cfg.n_routed_experts)
            idx = (lg.sigmoid() + mod.e_score_correction_bias).topk(cfg.num_experts_per_tok, dim=-1)[1]
        loads[id(mod)] = torch.bincount(idx.reshape(-1), minlength=cfg.n_routed_experts)
    for g in gates:
        g.register_forward_hook(hook)

    # Residual dropout on the embeddings and on each attention and MLP/MoE output (the text is small:
    # ~0.94 M tokens, which an 8 M-parameter model overfits in about a minute without it).
    def drop_hook(mod, inp, out):
        if not mod.training or args.dropout <= 0:
            return None
        if isinstance(out, tuple):
            return (torch.nn.functional.dropout(out[0], args.dropout, True),) + tuple(out[1:])
        return torch.nn.functional.dropout(out, args.dropout, True)
    model.model.embed_tokens.register_forward_hook(drop_hook)
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(drop_hook)
        layer.mlp.register_forward_hook(drop_hook)

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=dev.type == "cuda")
    budget = args.minutes * 60.0
    warmup = 100

    def batch(ids, bs, gen=None):
        ix = torch.randint(0, ids.numel() - args.seq - 1, (bs,), generator=gen)
        x = torch.stack([ids[i:i + args.seq + 1] for i in ix])
        return x.to(dev, non_blocking=True)

    vgen = torch.Generator().manual_seed(7)
    val_batches = [batch(val_ids, 16, vgen) for _ in range(4)]

    def evaluate():
        model.eval()
        tot = 0.0
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16):
            for xb in val_batches:
                lg = model(input_ids=xb[:, :-1]).logits.float()
                tot += float(torch.nn.functional.cross_entropy(lg.reshape(-1, V), xb[:, 1:].reshape(-1)))
        model.train()
        return tot / len(val_batches)

    model.train()
    t_train0 = time.time()
    step, best, best_state, losses = 0, float("inf"), None, []
    est_steps = None
    while True:
        el = time.time() - t_train0
        if el > budget:
            break
        # lr: warmup then cosine over the (estimated) number of steps that fit the budget
        if step == 50:
            est_steps = int(budget / (el / 50))
        total = est_steps or 10 ** 9
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / total))))
        for gparam in opt.param_groups:
            gparam["lr"] = lr
        xb = batch(train_ids, args.batch)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(input_ids=xb[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, V), xb[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # aux-loss-free balancing (DeepSeek-V3): bias += gamma * sign(mean - load)
            for g in gates:
                ld = loads.get(id(g))
                if ld is not None:
                    ld = ld.float()
                    g.e_score_correction_bias += 1e-3 * torch.sign(ld.mean() - ld)
        step += 1
        if step % 50 == 0:
            losses.append((step, round(time.time() - t_train0, 1), float(loss.detach())))
        if step % 100 == 0:
            vl = evaluate()
            log["evals"].append({"step": step, "time_s": round(time.time() - t_train0, 1), "train_loss": float(loss),
                                 "val_loss": vl, "lr": lr})
            print(f"step {step} t {time.time() - t_train0:.0f}s loss {float(loss):.3f} val {vl:.3f} lr {lr:.2e}",
                  flush=True)
            if vl < best:
                best = vl
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    t_train = time.time() - t_train0
    vl = evaluate()
    log["evals"].append({"step": step, "time_s": round(t_train, 1), "val_loss": vl})
    if vl < best or best_state is None:
        best = vl
        best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    tokens_seen = step * args.batch * args.seq
    log.update(steps=step, train_seconds=round(t_train, 1), tokens_seen=tokens_seen,
               epochs=tokens_seen / train_ids.numel(), best_val_loss=best, train_losses=losses)
    print(f"trained {step} steps in {t_train:.0f} s ({tokens_seen / t_train:.0f} tok/s), best val {best:.3f}",
          flush=True)

    # ---- held-out perplexity in transformers (f32 on the CPU; the weights as trained and f16-rounded) ----
    model = model.float().cpu().eval()
    torch.set_num_threads(os.cpu_count() or 1)
    hid = torch.tensor(held_ids, dtype=torch.long)[None, :]

    def ppl():
        with torch.no_grad():
            lg = model(input_ids=hid).logits[0].double()
        nll = torch.nn.functional.cross_entropy(lg[:-1], hid[0, 1:], reduction="mean")
        return float(torch.exp(nll)), float(nll)
    p32, nll32 = ppl()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
        for n_, b in model.named_buffers():
            if n_.endswith("e_score_correction_bias"):
                b.copy_(b.half().float())
    p16, nll16 = ppl()
    log.update(heldout_tokens=len(held_ids), heldout_ppl_f32=p32, heldout_nll_f32=nll32,
               heldout_ppl_f16=p16, heldout_nll_f16=nll16)
    print(f"held-out ({len(held_ids)} ids): ppl f32 weights {p32:.4f}, f16 weights {p16:.4f}", flush=True)

    # greedy samples (f16-rounded weights), for comparing with latte's output
    samples = {}
    for prompt in ["The quick brown fox", "It is a truth universally acknowledged", "Elizabeth"]:
        ids = [bos_id] + tok.encode(prompt).ids
        x = torch.tensor(ids)[None, :]
        with torch.no_grad():
            for _ in range(48):
                nxt = int(model(input_ids=x).logits[0, -1].argmax())
                x = torch.cat([x, torch.tensor([[nxt]])], dim=1)
        samples[prompt] = {"ids": x[0].tolist(), "text": tok.decode(x[0, len(ids):].tolist())}
        print(f"sample: {prompt!r} -> {samples[prompt]['text']!r}", flush=True)
    log["samples"] = samples

    # ---- save ----
    ck = os.path.join(args.out, "ckpt")
    model.half().save_pretrained(ck, max_shard_size="8MB")
    tok.save(os.path.join(ck, "tokenizer.json"))
    with open(os.path.join(ck, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": True, "bos_token": BOS, "eos_token": EOS}, f, ensure_ascii=False)
    with open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(held_text)
    np.asarray(held_ids, dtype="<i4").tofile(os.path.join(args.out, "heldout.i32"))
    log["total_seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)
    print(f"train_tiny: done in {log['total_seconds']:.0f} s on {device_name}", flush=True)


if __name__ == "__main__":
    main()
