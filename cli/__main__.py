"""python -m cli: the kplane command."""
import sys

from cli.main import main

sys.exit(main())
