"""A warm `ask`: a resident helper per workspace keeps the model library imported and the MCP
servers running; `graphchat ask` hands its question over and shows the turn (see
docs/cli.md, `graphchat warm`).

- identity: which helper a command may use, where its socket lives (stdlib only)
- wire: the line protocol between client and helper
- client: the thin side of `ask` (imports neither litellm nor the MCP SDK)
- helper: the resident process
- control: start, status and stop (`graphchat warm`, `settings.warm: auto`)
"""
