import sys

from lafuse.cli import main

sys.exit(main())
