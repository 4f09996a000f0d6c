"""Engines, one folder each."""
