import sys

from kinema.cli.main import main

sys.exit(main())
