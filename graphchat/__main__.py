from graphchat.cli.main import entry

entry()
