import sys

from segrl.cli import main

sys.exit(main())
