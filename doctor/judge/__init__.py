"""The judge floor: the YAML rule base, its predicates, evaluation, fix recipes and rule tests.

Reads Facts (and derives what the rules need), returns a Report. Never observes a machine or a log
itself and never renders.
"""
