"""The ``memoryquest`` command: one module per subcommand, listed in :data:`memoryquest.cli.main.COMMANDS`."""
