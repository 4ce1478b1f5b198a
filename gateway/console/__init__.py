"""The web console at /ui: static ES modules and one stylesheet that call the
public REST API with the user's token (docs/console.md)."""
