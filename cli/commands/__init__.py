"""The CLI's commands, one module per area; cli/main.py registers them."""
