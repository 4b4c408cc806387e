import sys

from nnrt.devmgr.main import main

sys.exit(main())
