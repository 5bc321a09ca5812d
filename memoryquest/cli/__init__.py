"""The ``memoryquest`` command. Each module here adds its own subcommands."""
