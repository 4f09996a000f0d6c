"""SGLang: its log parser, rules and metric names."""
