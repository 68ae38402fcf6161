"""What the tests and the bench scripts share: servers and brokers started for real, the
OTLP load and emitters, the RAG service the alert tests drive, waiting on conditions, and
the writer of the bench tables in docs/. The bench imports from here; no test imports
`bench/`."""
