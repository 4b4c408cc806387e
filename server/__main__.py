import sys

from nnrt.server.main import main

sys.exit(main())
