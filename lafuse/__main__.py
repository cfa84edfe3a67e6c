from lafuse.cli import entry

entry()
