"""The benchmarks: each performance claim of llm-doctor measured next to its reference in the same
run (`python -m bench` or `bench/run`; one script per measure, each also runnable alone)."""
