"""Where samples come from: recording files, the Parquet store, Prometheus's HTTP API."""
