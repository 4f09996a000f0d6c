"""vLLM: the V0 and V1 engines' own messages (PyTorch's are read with _torch)."""
