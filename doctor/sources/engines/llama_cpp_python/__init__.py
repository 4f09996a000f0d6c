"""llama-cpp-python: the Python binding of llama.cpp; its log is llama.cpp's plus its own lines."""
