"""LM Studio: a desktop app and `lms` CLI running llama.cpp; its row, patterns and parser."""
