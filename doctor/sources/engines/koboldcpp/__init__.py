"""KoboldCpp: a launcher that bundles llama.cpp (LostRuins/koboldcpp)."""
