#!/usr/bin/env python3
"""Converts a Hugging Face DeepSeek-V2/V3 checkpoint (config.json + *.safetensors [+ tokenizer.json])
to a GGUF v3 file of architecture `deepseek2` with llama.cpp's key and tensor names
(docs/MODEL_FILES.md). Needs Python 3 and numpy only: safetensors and GGUF are read and written here.

    python3 tools/convert_hf_to_gguf.py MODEL_DIR -o model.gguf [--outtype f32|f16|bf16|q8_0]
                                        [--split-kv-b] [--name NAME] [--pre deepseek-v3]

Weight types: 1-D tensors (norms), the router (ffn_gate_inp) and exp_probs_b are always f32;
every other weight gets --outtype (q8_0 falls back to f16 for a row length that is not a multiple
of 32, as llama.cpp does). Q8_0 is ggml's quantize_row_q8_0_ref: per block of 32, d = amax/127
stored as fp16, q = round-half-away(x / d) as int8.

RoPE: the model authors' DeepSeek code rotates adjacent pairs (2i, 2i+1) of the 64 rope dims
(V2: complex view of pairs; transformers' V3 port: `apply_rotary_pos_emb_interleave`, which
de-interleaves the pairs and then uses rotate_half, the same rotation with the output permuted
identically for q and k). ggml's "normal" rope, which llama.cpp's deepseek2 graph and latte use,
rotates the same adjacent pairs, so no weight is permuted. Only a V3 config with
`rope_interleave: false` (plain rotate_half on pairs (i, i+32)) needs a permutation of the rope
rows of q_proj/q_b_proj and kv_a_proj_with_mqa; this converter applies it then.

The output is deterministic: the same checkpoint gives the same bytes.
"""
import argparse
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError:  # pragma: no cover
    sys.stderr.write("convert_hf_to_gguf.py: error: numpy is required (Debian: apt-get install python3-numpy)\n")
    sys.exit(2)

# ---- safetensors -----------------------------------------------------------------------------

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "BF16": np.uint16,
              "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
              "BOOL": np.bool_}


class SafeTensors:
    """All tensors of a checkpoint directory (one file, or shards listed by an index)."""

    def __init__(self, model_dir):
        self.entries = {}  # name -> (path, dtype str, shape, begin, end)
        index = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index, "r", encoding="utf-8") as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors"))
        if not files:
            raise SystemExit(f"convert_hf_to_gguf.py: error: no *.safetensors in {model_dir}")
        for name in files:
            path = os.path.join(model_dir, name)
            with open(path, "rb") as f:
                (hlen,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(hlen))
            base = 8 + hlen
            for k, v in header.items():
                if k == "__metadata__":
                    continue
                b, e = v["data_offsets"]
                self.entries[k] = (path, v["dtype"], tuple(v["shape"]), base + b, base + e)

    def __contains__(self, name):
        return name in self.entries

    def keys(self):
        return self.entries.keys()

    def get(self, name):
        """The tensor as float32 (bf16/f16/f64 widened exactly; f64 rounded)."""
        path, dt, shape, b, e = self.entries[name]
        if dt not in _ST_DTYPES:
            raise SystemExit(f"convert_hf_to_gguf.py: error: tensor {name} has dtype {dt}, "
                             "expected F32, F16, BF16 or F64 (FP8 checkpoints: dequantize them first)")
        with open(path, "rb") as f:
            f.seek(b)
            raw = f.read(e - b)
        a = np.frombuffer(raw, dtype=_ST_DTYPES[dt])
        if dt == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        a = a.astype(np.float32).reshape(shape)
        return a


# ---- number formats ----------------------------------------------------------------------------

GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}


def to_bf16_bits(x):
    """float32 -> bf16 bits, round to nearest even (as ggml's fp32_to_bf16; NaN kept quiet)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 64).astype(np.uint16)
    return r


def quantize_q8_0(x):
    """Rows of float32 (last dim % 32 == 0) -> bytes of Q8_0 blocks, as ggml's reference."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    blocks = x.reshape(-1, 32)
    amax = np.max(np.abs(blocks), axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = blocks * idv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # roundf: half away from 0
    out = np.empty(blocks.shape[0], dtype=[("d", "<f2"), ("qs", "i1", (32,))])
    out["d"] = d.astype(np.float16)
    out["qs"] = q
    return out.tobytes()


def encode_tensor(a, kind):
    """(ggml type, bytes) of the float32 array `a` in format `kind`."""
    if kind == "f32":
        return GGML_F32, np.ascontiguousarray(a, dtype="<f4").tobytes()
    if kind == "f16":
        return GGML_F16, np.ascontiguousarray(a.astype("<f2")).tobytes()
    if kind == "bf16":
        return GGML_BF16, to_bf16_bits(a).astype("<u2").tobytes()
    if kind == "q8_0":
        return GGML_Q8_0, quantize_q8_0(a)
    raise ValueError(kind)


# ---- GGUF writer -------------------------------------------------------------------------------

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR = 4, 5, 6, 7, 8, 9


class GGUFWriter:
    def __init__(self, alignment=32):
        self.kv = []        # (key, type, value)
        self.tensors = []   # (name, ne list, ggml type, bytes)
        self.alignment = alignment

    def u32(self, k, v): self.kv.append((k, GGUF_U32, int(v)))
    def f32(self, k, v): self.kv.append((k, GGUF_F32, float(v)))
    def boolean(self, k, v): self.kv.append((k, GGUF_BOOL, bool(v)))
    def str(self, k, v): self.kv.append((k, GGUF_STR, v))
    def str_arr(self, k, v): self.kv.append((k, GGUF_ARR, (GGUF_STR, list(v))))
    def i32_arr(self, k, v): self.kv.append((k, GGUF_ARR, (GGUF_I32, list(v))))

    def add_tensor(self, name, a, kind):
        """`a`: numpy float32 array, numpy shape (..., ne0): the ggml ne list is its reverse."""
        ne = list(reversed(a.shape))
        t, data = encode_tensor(a, kind)
        self.tensors.append((name, ne, t, data))
        return t

    @staticmethod
    def _s(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _value(self, t, v):
        if t == GGUF_U32: return struct.pack("<I", v)
        if t == GGUF_I32: return struct.pack("<i", v)
        if t == GGUF_F32: return struct.pack("<f", v)
        if t == GGUF_BOOL: return struct.pack("<B", 1 if v else 0)
        if t == GGUF_STR: return self._s(v)
        if t == GGUF_ARR:
            et, xs = v
            out = [struct.pack("<IQ", et, len(xs))]
            if et == GGUF_I32:
                out.append(np.asarray(xs, dtype="<i4").tobytes())
            else:
                out.extend(self._value(et, x) for x in xs)
            return b"".join(out)
        raise ValueError(t)

    def write(self, path):
        al = self.alignment
        head = [b"GGUF", struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))]
        for k, t, v in self.kv:
            head += [self._s(k), struct.pack("<I", t), self._value(t, v)]
        off = 0
        for name, ne, t, data in self.tensors:
            head += [self._s(name), struct.pack("<I", len(ne)), struct.pack(f"<{len(ne)}Q", *ne),
                     struct.pack("<IQ", t, off)]
            off += (len(data) + al - 1) // al * al
        h = b"".join(head)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(h)
            f.write(b"\0" * ((al - len(h) % al) % al))
            for _, _, _, data in self.tensors:
                f.write(data)
                f.write(b"\0" * ((al - len(data) % al) % al))
        os.replace(tmp, path)


# ---- tokenizer ---------------------------------------------------------------------------------

def load_tokenizer(model_dir, cfg, n_vocab):
    """(tokens, types, merges, bos, eos, add_bos) from tokenizer.json (a byte-level BPE)."""
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.exists(path):
        raise SystemExit(f"convert_hf_to_gguf.py: error: {path} is missing (a byte-level BPE tokenizer.json is needed)")
    with open(path, "r", encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        raise SystemExit(f"convert_hf_to_gguf.py: error: {path}: model.type is {model.get('type')!r}, expected 'BPE'")
    id_to_tok = {int(i): t for t, i in model["vocab"].items()}
    special = set()
    for a in tj.get("added_tokens", []):
        id_to_tok[int(a["id"])] = a["content"]
        if a.get("special", False):
            special.add(int(a["id"]))
    tokens, types = [], []
    for i in range(n_vocab):
        if i in id_to_tok:
            tokens.append(id_to_tok[i])
            types.append(3 if i in special else 1)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(5)
    extra = [i for i in id_to_tok if i >= n_vocab]
    if extra:
        raise SystemExit(f"convert_hf_to_gguf.py: error: tokenizer has ids up to {max(extra)}, config vocab_size is {n_vocab}")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    tcfg = {}
    tcp = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(tcp):
        with open(tcp, "r", encoding="utf-8") as f:
            tcfg = json.load(f)

    def tok_id(key):
        v = cfg.get(key + "_token_id")
        if v is None:
            t = tcfg.get(key + "_token")
            if isinstance(t, dict):
                t = t.get("content")
            if t is not None:
                v = tokens.index(t)
        return v

    add_bos = tcfg.get("add_bos_token", True)
    return tokens, types, merges, tok_id("bos"), tok_id("eos"), add_bos


# ---- the model ---------------------------------------------------------------------------------

def rope_config(cfg):
    """(theta, scaling dict or None) from config.json's rope_scaling / rope_parameters / rope_theta."""
    rp = cfg.get("rope_parameters") or {}
    if isinstance(rp, dict) and "full_attention" in rp and isinstance(rp["full_attention"], dict):
        rp = rp["full_attention"]
    theta = cfg.get("rope_theta", rp.get("rope_theta", 10000.0))
    sc = cfg.get("rope_scaling") or rp
    typ = (sc or {}).get("rope_type", (sc or {}).get("type", "default"))
    if typ in (None, "default", "none"):
        return theta, None
    if typ != "yarn":
        raise SystemExit(f"convert_hf_to_gguf.py: error: rope scaling type {typ!r} is not supported (only yarn)")
    return theta, sc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("-o", "--outfile", required=True)
    ap.add_argument("--outtype", default="f16", choices=["f32", "f16", "bf16", "q8_0"])
    ap.add_argument("--name", default=None, help="general.name (default: the directory's name)")
    ap.add_argument("--pre", default=None, help="tokenizer.ggml.pre (default: deepseek-v3 for V3, deepseek-llm for V2)")
    ap.add_argument("--split-kv-b", action="store_true",
                    help="write attn_k_b/attn_v_b (llama.cpp's MLA layout) instead of attn_kv_b")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    with open(os.path.join(args.model_dir, "config.json"), "r", encoding="utf-8") as f:
        cfg = json.load(f)
    mt = cfg.get("model_type", "")
    archs = cfg.get("architectures") or []
    is_v3 = mt == "deepseek_v3" or any("DeepseekV3" in a for a in archs)
    is_v2 = mt == "deepseek_v2" or any("DeepseekV2" in a for a in archs)
    if not (is_v2 or is_v3):
        raise SystemExit(f"convert_hf_to_gguf.py: error: model_type {mt!r} / architectures {archs}: "
                         "expected a DeepSeek-V2 or V3 checkpoint")
    st = SafeTensors(args.model_dir)

    E = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    NL = cfg["num_hidden_layers"]
    L = cfg["kv_lora_rank"]
    R = cfg["qk_rope_head_dim"]
    N = cfg["qk_nope_head_dim"]
    V = cfg["v_head_dim"]
    QL = cfg.get("q_lora_rank") or 0
    n_vocab = cfg["vocab_size"]
    X = cfg.get("n_routed_experts") or 0
    first_dense = cfg.get("first_k_dense_replace", 0) if X else NL
    moe_freq = cfg.get("moe_layer_freq", 1)
    if X and moe_freq != 1:
        raise SystemExit("convert_hf_to_gguf.py: error: moe_layer_freq != 1 is not supported by the deepseek2 layout")
    theta, yarn = rope_config(cfg)
    scoring = cfg.get("scoring_func", "sigmoid" if is_v3 else "softmax")
    topk_method = cfg.get("topk_method", "noaux_tc" if is_v3 else "greedy")

    w = GGUFWriter()
    a = "deepseek2."
    w.str("general.architecture", "deepseek2")
    w.str("general.name", args.name or os.path.basename(os.path.normpath(args.model_dir)))
    w.u32(a + "context_length", cfg.get("max_position_embeddings", 4096))
    w.u32(a + "embedding_length", E)
    w.u32(a + "block_count", NL)
    w.u32(a + "feed_forward_length", cfg["intermediate_size"])
    w.u32(a + "attention.head_count", H)
    w.u32(a + "attention.head_count_kv", 1 if args.split_kv_b else H)
    w.f32(a + "rope.freq_base", theta)
    w.f32(a + "attention.layer_norm_rms_epsilon", cfg.get("rms_norm_eps", 1e-6))
    w.u32(a + "leading_dense_block_count", min(first_dense, NL))
    w.u32(a + "vocab_size", n_vocab)
    if QL:
        w.u32(a + "attention.q_lora_rank", QL)
    w.u32(a + "attention.kv_lora_rank", L)
    if args.split_kv_b:
        w.u32(a + "attention.key_length", L + R)
        w.u32(a + "attention.value_length", L)
        w.u32(a + "attention.key_length_mla", N + R)
        w.u32(a + "attention.value_length_mla", V)
    else:
        w.u32(a + "attention.key_length", N + R)
        w.u32(a + "attention.value_length", V)
    if X:
        w.u32(a + "expert_used_count", cfg["num_experts_per_tok"])
        w.u32(a + "expert_feed_forward_length", cfg["moe_intermediate_size"])
        w.u32(a + "expert_count", X)
        w.u32(a + "expert_shared_count", cfg.get("n_shared_experts") or 0)
        w.f32(a + "expert_weights_scale", cfg.get("routed_scaling_factor", 1.0))
        w.boolean(a + "expert_weights_norm", bool(cfg.get("norm_topk_prob", False)))
        w.u32(a + "expert_gating_func", 2 if scoring == "sigmoid" else 1)
        ng, tg = cfg.get("n_group"), cfg.get("topk_group")
        if ng and ng > 1:
            w.u32(a + "expert_group_count", ng)
            w.u32(a + "expert_group_used_count", tg or ng)
            if topk_method == "group_limited_greedy" and not args.quiet:
                sys.stderr.write("convert_hf_to_gguf.py: warning: topk_method group_limited_greedy scores a group by its "
                                 "best expert; llama.cpp/latte score it by the sum of its best two (V3's rule)\n")
    w.u32(a + "rope.dimension_count", R)
    if yarn:
        factor = float(yarn["factor"])
        orig = yarn.get("original_max_position_embeddings") or cfg.get("max_position_embeddings")
        mscale = yarn.get("mscale", 1.0) or 0.0
        mscale_all = yarn.get("mscale_all_dim", 0.0) or 0.0
        if (mscale or mscale_all) and abs(mscale - mscale_all) > 1e-9 and not args.quiet:
            sys.stderr.write("convert_hf_to_gguf.py: warning: mscale != mscale_all_dim: the authors' code scales "
                             "cos/sin by their ratio, which the deepseek2 GGUF keys cannot express\n")
        w.str(a + "rope.scaling.type", "yarn")
        w.f32(a + "rope.scaling.factor", factor)
        w.u32(a + "rope.scaling.original_context_length", orig)
        w.f32(a + "rope.scaling.yarn_log_multiplier", 0.1 * mscale_all)
        bf, bs = yarn.get("beta_fast", 32), yarn.get("beta_slow", 1)
        if bf != 32:
            w.f32(a + "rope.scaling.yarn_beta_fast", bf)
        if bs != 1:
            w.f32(a + "rope.scaling.yarn_beta_slow", bs)

    tokens, types, merges, bos, eos, add_bos = load_tokenizer(args.model_dir, cfg, n_vocab)
    w.str("tokenizer.ggml.model", "gpt2")
    w.str("tokenizer.ggml.pre", args.pre or ("deepseek-v3" if is_v3 else "deepseek-llm"))
    w.str_arr("tokenizer.ggml.tokens", tokens)
    w.i32_arr("tokenizer.ggml.token_type", types)
    w.str_arr("tokenizer.ggml.merges", merges)
    if bos is not None:
        w.u32("tokenizer.ggml.bos_token_id", bos)
    if eos is not None:
        w.u32("tokenizer.ggml.eos_token_id", eos)
    w.boolean("tokenizer.ggml.add_bos_token", add_bos)
    w.boolean("tokenizer.ggml.add_eos_token", False)

    outtype = args.outtype
    used = set()
    counts = {}

    def get(name):
        if name not in st:
            raise SystemExit(f"convert_hf_to_gguf.py: error: tensor {name} is missing from the checkpoint")
        used.add(name)
        return st.get(name)

    def put(name, arr, kind=None):
        kind = kind or outtype
        if arr.ndim == 1:
            kind = "f32"
        if kind == "q8_0" and arr.shape[-1] % 32 != 0:
            kind = "f16"
        t = w.add_tensor(name, arr, kind)
        counts[t] = counts.get(t, 0) + 1

    # V3 with rope_interleave false: plain rotate_half on (i, i+R/2): reorder rows to adjacent pairs.
    rope_perm = None
    if is_v3 and cfg.get("rope_interleave", True) is False:
        rope_perm = np.stack([np.arange(R // 2), np.arange(R // 2) + R // 2], axis=1).reshape(-1)

    def permute_q(wq):  # rows: H × (N + R)
        if rope_perm is None:
            return wq
        wq = wq.reshape(H, N + R, -1).copy()
        wq[:, N:, :] = wq[:, N:, :][:, rope_perm, :]
        return wq.reshape(H * (N + R), -1)

    def permute_kva(wk):  # rows: L + R
        if rope_perm is None:
            return wk
        wk = wk.copy()
        wk[L:, :] = wk[L:, :][rope_perm, :]
        return wk

    put("token_embd.weight", get("model.embed_tokens.weight"))
    put("output_norm.weight", get("model.norm.weight"))
    if "lm_head.weight" in st:
        put("output.weight", get("lm_head.weight"))
    else:
        put("output.weight", st.get("model.embed_tokens.weight"))
    for i in range(NL):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", get(p + "input_layernorm.weight"))
        if QL:
            put(b + "attn_q_a.weight", get(p + "self_attn.q_a_proj.weight"))
            put(b + "attn_q_a_norm.weight", get(p + "self_attn.q_a_layernorm.weight"))
            put(b + "attn_q_b.weight", permute_q(get(p + "self_attn.q_b_proj.weight")))
        else:
            put(b + "attn_q.weight", permute_q(get(p + "self_attn.q_proj.weight")))
        put(b + "attn_kv_a_mqa.weight", permute_kva(get(p + "self_attn.kv_a_proj_with_mqa.weight")))
        put(b + "attn_kv_a_norm.weight", get(p + "self_attn.kv_a_layernorm.weight"))
        kvb = get(p + "self_attn.kv_b_proj.weight")  # [H·(N+V), L]
        if args.split_kv_b:
            kvb = kvb.reshape(H, N + V, L)
            put(b + "attn_k_b.weight", np.ascontiguousarray(kvb[:, :N, :].transpose(0, 2, 1)))  # {N, L, H}
            put(b + "attn_v_b.weight", np.ascontiguousarray(kvb[:, N:, :]))                    # {L, V, H}
        else:
            put(b + "attn_kv_b.weight", kvb)
        put(b + "attn_output.weight", get(p + "self_attn.o_proj.weight"))
        put(b + "ffn_norm.weight", get(p + "post_attention_layernorm.weight"))
        if i < first_dense:
            put(b + "ffn_gate.weight", get(p + "mlp.gate_proj.weight"))
            put(b + "ffn_up.weight", get(p + "mlp.up_proj.weight"))
            put(b + "ffn_down.weight", get(p + "mlp.down_proj.weight"))
            continue
        F = cfg["moe_intermediate_size"]
        put(b + "ffn_gate_inp.weight", get(p + "mlp.gate.weight"), "f32")
        if p + "mlp.gate.e_score_correction_bias" in st:
            put(b + "exp_probs_b.bias", get(p + "mlp.gate.e_score_correction_bias"), "f32")
        if p + "mlp.experts.gate_up_proj" in st:  # transformers v5 fused experts
            gu = get(p + "mlp.experts.gate_up_proj")
            dn = get(p + "mlp.experts.down_proj")
            if gu.shape == (X, E, 2 * F) and gu.shape != (X, 2 * F, E):
                gu = gu.transpose(0, 2, 1)
            if dn.shape == (X, F, E) and dn.shape != (X, E, F):
                dn = dn.transpose(0, 2, 1)
            if gu.shape != (X, 2 * F, E) or dn.shape != (X, E, F):
                raise SystemExit(f"convert_hf_to_gguf.py: error: fused expert shapes {gu.shape}, {dn.shape} not understood")
            gate, up = gu[:, :F, :], gu[:, F:, :]
        else:
            gate = np.stack([get(p + f"mlp.experts.{e}.gate_proj.weight") for e in range(X)])
            up = np.stack([get(p + f"mlp.experts.{e}.up_proj.weight") for e in range(X)])
            dn = np.stack([get(p + f"mlp.experts.{e}.down_proj.weight") for e in range(X)])
        put(b + "ffn_gate_exps.weight", np.ascontiguousarray(gate))  # {E, F, X}
        put(b + "ffn_up_exps.weight", np.ascontiguousarray(up))
        put(b + "ffn_down_exps.weight", np.ascontiguousarray(dn))    # {F, E, X}
        if cfg.get("n_shared_experts"):
            put(b + "ffn_gate_shexp.weight", get(p + "mlp.shared_experts.gate_proj.weight"))
            put(b + "ffn_up_shexp.weight", get(p + "mlp.shared_experts.up_proj.weight"))
            put(b + "ffn_down_shexp.weight", get(p + "mlp.shared_experts.down_proj.weight"))

    unused = sorted(k for k in st.keys() if k not in used and k != "lm_head.weight"
                    and not k.endswith("rotary_emb.inv_freq") and not k.startswith("model.layers.%d." % NL))
    if unused:
        raise SystemExit("convert_hf_to_gguf.py: error: checkpoint tensors not converted: " + ", ".join(unused[:8]))
    w.u32("general.file_type", FILE_TYPE[outtype])
    if outtype == "q8_0":
        w.u32("general.quantization_version", 2)
    w.write(args.outfile)
    if not args.quiet:
        names = {GGML_F32: "f32", GGML_F16: "f16", GGML_BF16: "bf16", GGML_Q8_0: "q8_0"}
        summary = ", ".join(f"{n} {names[t]}" for t, n in sorted(counts.items()))
        sys.stderr.write(f"convert_hf_to_gguf.py: wrote {args.outfile}: {len(w.tensors)} tensors ({summary}), "
                         f"{os.path.getsize(args.outfile) / 2**20:.2f} MiB\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
