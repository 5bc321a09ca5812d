"""``python -m memoryquest.testing.careless``: see ``runs.main``."""

import sys

from memoryquest.testing.careless.runs import main

if __name__ == "__main__":
    sys.exit(main())
