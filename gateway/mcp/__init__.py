"""memgrid over the Model Context Protocol (docs/mcp.md): server.py serves
/mcp, tools.py names the tools, schemas.py reads their schemas from the
OpenAPI description, dispatch.py makes each call as its REST call,
prompts.py holds the prompts."""
