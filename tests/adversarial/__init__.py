"""Adversarial tests (issue 10): a hostile model, a hostile MCP server, a damaged workspace,
each through the real `graphchat` command. `corpus/` holds the hostile files."""
