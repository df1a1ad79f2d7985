"""One module per CLI verb: `HELP`, `add_arguments(parser)`, `run(args) -> int`."""
