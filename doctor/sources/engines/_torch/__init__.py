"""What the PyTorch servers print alike: sizes, PyTorch's out-of-memory messages, traceback frames
and the board on which their parsers record OOMs (`pytorch`)."""
