"""memgrid's command-line tool (docs/cli.md): the REST API from a shell, import and export."""
