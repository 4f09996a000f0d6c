"""A child for the crash test: the real engine, made to abort the way llama.cpp aborts.

After a few decode steps it hands llama_decode a batch larger than n_batch, as a buggy caller
would; llama.cpp answers with `GGML_ASSERT(n_tokens_all <= cparams.n_batch) failed` and abort()s
the process (src/llama-context.cpp, llama_context::decode). Run as
`python -m tests.watch.aborting_child` (the runner puts the repository on PYTHONPATH).
"""

from __future__ import annotations

import sys

from doctor.sources.live.embedded.child import ChildRun, main

ABORT_AT_STEP = 5


class AbortingRun(ChildRun):
    def after_step(self, step: int) -> None:
        if step != ABORT_AT_STEP:
            return
        from llama_cpp import _internals

        llm = self.llm
        n = int(self.llama_cpp.llama_n_batch(llm.ctx)) + 8
        batch = _internals.LlamaBatch(n_tokens=n, embd=0, n_seq_max=1, verbose=False)
        batch.set_batch(batch=[llm.token_bos()] * n, n_past=llm.n_tokens, logits_all=False)
        self.llama_cpp.llama_decode(llm.ctx, batch.batch)


if __name__ == "__main__":
    sys.exit(main(run_class=AbortingRun))
