import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # make `grid_sql` importable under plain `pytest`
    sys.path.insert(0, str(ROOT))
