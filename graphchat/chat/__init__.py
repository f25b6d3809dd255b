"""The interactive `chat` host: terminal UI, inline asker, live tool activity, slash commands.

Imported only by `graphchat chat` (it pulls in prompt_toolkit and rich).
"""
