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
                          "re-run site.yml (settled)": 35.0, "re-run changed": 0, "memory MiB total": 3000.0,
                          "idle cpu % total": 50.0,
                          "lab check --no-disruptive": {"seconds": 55.0}, "lab check --all": {"seconds": 350.0},
                          "cpu steal %": 12.5},
                         table)
    rows = [line for line in table.read_text().splitlines() if line.startswith("|")]
    columns = rows[0].count("|")
    assert all(row.count("|") == columns for row in rows), "every row has the header's columns"
    assert rows[-1].split(" | ")[3:] == ["ha", "300.0", "40.0", "35.0", "0", "3000.0", "50.0", "55.0", "350.0",
                                         "12.5 |"]


def test_steal_is_the_share_of_cpu_time_the_hypervisor_took(tmp_path: Path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n")
    before = B.host_cpu(stat)
    assert before == (40, 1000)
    stat.write_text("cpu  200 0 100 1400 10 0 0 290 0 0\n")
    assert B.steal_since(before, B.host_cpu(stat)) == 25.0


def test_memory_parts_of_a_cgroup_v1_and_v2_node():
    mib = 1024 * 1024
    v1 = (f"cache {900 * mib}\nrss {10 * mib}\ntotal_cache {900 * mib}\ntotal_rss {425 * mib}\n"
          f"total_mapped_file {385 * mib}\ntotal_inactive_file {166 * mib}\ntotal_active_file {747 * mib}\n")
    assert B.memory_parts(v1) == {"anon": 425.0, "mapped files": 385.0, "other active page cache": 362.0}
    v2 = f"anon {160 * mib}\nfile {515 * mib}\nfile_mapped {203 * mib}\nactive_file {369 * mib}\ninactive_file 1\n"
    assert B.memory_parts(v2) == {"anon": 160.0, "mapped files": 203.0, "other active page cache": 166.0}
    assert B.memory_parts("anon 1\nfile_mapped 9\nactive_file 4\n")["other active page cache"] == 0
