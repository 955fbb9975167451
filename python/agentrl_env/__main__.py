"""`python3 -m agentrl_env`: the same as `python3 -m agentrl_env.serve`."""

import sys

from .serve import main

sys.exit(main())
