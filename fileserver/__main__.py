"""``python -m fileserver``: run the file server configured by the environment."""

import sys

from fileserver.server import main

sys.exit(main())
