"""The `mnemoray` command line: the top layer, above the core, `pipeline`, `serve` and `jobs`.

One module per command group; `mnemoray.cli.main` assembles them and holds the entry function.
"""
