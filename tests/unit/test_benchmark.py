"""Unit tests of the benchmark's pure parts: the usage figures read on a machine and the performance table row."""

from pathlib import Path

from tools import benchmark as B


def test_parse_usage():
    figures, hz = B.parse_usage("etcd 51200 300\nkubelet 80000 1200\nnode 900000 55555\n100")
    assert figures == {"etcd": (51200, 300), "kubelet": (80000, 1200), "node": (900000, 55555)}
    assert hz == 100


def test_usage_script_asks_every_component_and_the_node():
    for unit in B.UNITS:
        assert unit in B.USAGE
    assert "MemAvailable" in B.USAGE and "CLK_TCK" in B.USAGE


def test_a_run_appends_one_row_under_the_table(tmp_path: Path):
    table = tmp_path / "performance.md"
    header = B.PERFORMANCE.read_text()
    table.write_text(header)
    B.append_performance({"profile": "ha", "bring-up total (to all nodes Ready)": 300.0, "re-run site.yml": 40.0,
                          "re-run changed": 0, "memory MiB total": 3000.0, "idle cpu % total": 50.0,
                          "lab check --no-disruptive": {"seconds": 55.0}, "lab check --all": {"seconds": 350.0}},
                         table)
    rows = [line for line in table.read_text().splitlines() if line.startswith("|")]
    columns = rows[0].count("|")
    assert all(row.count("|") == columns for row in rows), "every row has the header's columns"
    assert rows[-1].split(" | ")[3:] == ["ha", "300.0", "40.0", "0", "3000.0", "50.0", "55.0", "350.0 |"]
