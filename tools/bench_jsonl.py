"""latte-bench's JSONL output (one JSON object per line, -o jsonl), for the tools that tabulate it
(auto_table.py, isa_table.py)."""
import json


def rows(path):
    """The rows of one JSONL file, in order; blank lines skipped."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                yield json.loads(line)
