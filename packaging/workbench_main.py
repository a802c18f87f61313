"""Entry point of the frozen application: PyInstaller runs this file as ``__main__``."""

import sys

from workbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
