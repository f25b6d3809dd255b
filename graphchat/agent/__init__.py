"""The agent: the tool-calling loop and the conversational session that `ask` and `chat` share."""
