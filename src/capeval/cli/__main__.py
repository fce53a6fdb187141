import sys

from capeval.cli.main import main

sys.exit(main())
