"""`python -m reports RESULTS_DIR ...`: the report job without the rest of the kchaos CLI."""

import sys

from reports.submit import main

sys.exit(main())
