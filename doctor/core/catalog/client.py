"""Fact names read from what the client sent and got back (doctor/sources/clients/parser.py): reply
budgets, finish reasons, the front-end in between. Limits set by the client, not the engine."""

FACTS: list[tuple[str, str, str | None, str]] = [
    ("client.max_tokens", "int", "tokens",
     "reply budget a request or front-end set (max_tokens, max_new_tokens, n_predict, num_predict)"),
    ("client.max_tokens_name", "str", None, "what the client calls its reply budget (max_tokens, max_new_tokens, ...)"),
    ("client.truncation_length", "int", "tokens", "text-generation-webui truncation_length (the prompt it keeps)"),
    ("client.replies", "int", "count", "reply bodies read with a finish reason"),
    ("client.replies_capped", "int", "count",
     "replies that ended because the reply budget ran out (finish_reason length)"),
    ("client.replies_empty_length", "int", "count",
     "replies that ended for length (finish_reason length) with no token generated: the context was full "
     "before the reply"),
    ("client.history_tokens", "int", "tokens",
     "tokens a reply's usage counted beyond its prompt and completion (total_tokens - both): a history the "
     "server kept"),
    ("client.reply_cap", "int", "tokens", "completion tokens every budget-capped reply stopped at (the same for all)"),
    ("client.prompt_tokens_max", "int", "tokens", "largest prompt the client's replies or front-end reported"),
    ("client.prompt_tokens_min", "int", "tokens", "smallest prompt the client's replies reported"),
    ("client.completion_tokens_last", "int", "tokens", "tokens the front-end's last generation produced"),
    ("client.reply_room", "int", "tokens",
     "context left after the prompt of a refused request (n_ctx - prompt): the largest reply budget that fits"),
    ("client.frontend", "str", None, "the front-end between the user and the engine (text-generation-webui)"),
    ("client.frontend_engine", "str", None, "the engine the front-end runs inside, by its module (llama-cpp-python)"),
]
