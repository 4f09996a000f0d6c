"""llama.cpp: llama-cli, llama-server and the library's own lines (also read inside the logs of the
engines that wrap it)."""
