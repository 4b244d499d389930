"""python3 -m benchmarks.programs: see runner.py."""
import sys

from .runner import main

sys.exit(main())
