"""The encoder file of rag-monitor's second stage: all-MiniLM-L6-v2 (Apache-2.0) with int8
weights, built by `python -m training.export_pair_encoder` in the rag-monitor repository.
A distribution of its own so that only the `second-stage` extra installs its 22 MB."""

from pathlib import Path

ENCODER_PATH = Path(__file__).with_name("pair_encoder.onnx")
