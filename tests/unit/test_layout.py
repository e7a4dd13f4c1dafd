"""The test tree collects as one pytest session: pytest's default import mode ("prepend", no __init__.py in the
test folders) imports each test file by its basename, so two files with one name in two folders break the whole
collection ("import file mismatch") the moment both are selected, as `make test` does."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_module_has_a_unique_basename():
    seen: dict[str, list[str]] = defaultdict(list)
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name.startswith("test_") or path.name.endswith("_test.py"):
            seen[path.name].append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"test files sharing a basename (rename one): {clashes}"
