"""The command line's subcommands besides `run`; `monitor/__main__.py` parses argv and
dispatches to them."""
