"""The derive floor: facts computed from facts (memory budget, fit, context, run summaries).

The llama.cpp memory model and everything derived from the facts the sources read: KV bytes, compute
buffers, the weights' placement, fit verdicts, the context a run needs, what-if plans. Pure: reads a
Facts, sets derived.* facts; imports only doctor.core.
"""
