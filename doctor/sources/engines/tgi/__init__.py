"""Hugging Face text-generation-inference: launcher, router and shard messages."""
