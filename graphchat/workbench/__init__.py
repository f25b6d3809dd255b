"""The plan workbench (`graphchat workbench plan`): a draft edited through the authoring core,
the `workbench__*` tools a chat agent edits it with, and the full-screen app (textual, imported
only by `app.py`, which only the workbench command imports)."""
