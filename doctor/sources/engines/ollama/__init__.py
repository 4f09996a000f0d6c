"""Ollama: the server's slog lines, the `ollama run --verbose` statistics, and its llama.cpp runner."""
