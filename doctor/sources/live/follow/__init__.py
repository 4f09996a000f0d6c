"""An external engine followed through its text: a growing log file (follower.py) or a wrapped
command's output (wrapper.py), fed line by line to the log analyzer."""
