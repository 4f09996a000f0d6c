"""The front doors: one module per subcommand, each with `add_parser(sub)` and `run(args)`."""
