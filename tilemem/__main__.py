import sys

from tilemem.cli import main

sys.exit(main())
