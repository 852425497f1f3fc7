"""MemHouse benchmarks (LoCoMo ingest/retrieval, scale latency). See bench/README.md."""
