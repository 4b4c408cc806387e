import sys

from nnrt.devmgr.manager import main

sys.exit(main())
