"""The embedded detector's training pipeline and its planted-error generators: fitting the
first-stage model and the second stage's head, exporting the pair encoder, and the probe
families the tests and `bench/detector_quality.py` score. Needs the `training` extra
(`pip install -e '.[training]'`); nothing here is imported by `monitor/`."""
