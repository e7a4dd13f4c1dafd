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
                          "docker stats MiB total": 3300.0,
                          "idle cpu % total": 50.0,
                          "lab check --no-disruptive": {"seconds": 55.0}, "lab check --all": {"seconds": 350.0},
                          "cpu steal %": 12.5},
                         table)
    rows = [line for line in table.read_text().splitlines() if line.startswith("|")]
    columns = rows[0].count("|")
    assert all(row.count("|") == columns for row in rows), "every row has the header's columns"
    assert rows[-1].split(" | ")[3:] == ["ha", "300.0", "40.0", "35.0", "0", "3000.0", "3300.0", "50.0", "55.0",
                                         "350.0", "12.5 |"]


def test_steal_is_the_share_of_cpu_time_the_hypervisor_took(tmp_path: Path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n")
    before = B.host_cpu(stat)
    assert before == (40, 1000)
    stat.write_text("cpu  200 0 100 1400 10 0 0 290 0 0\n")
    assert B.steal_since(before, B.host_cpu(stat)) == 25.0


def test_memory_parts_of_a_cgroup_v1_and_v2_node():
    mib = 1024 * 1024
    # In use: the usage less the page cache no program maps (here 900 - 1 of tmpfs - 385 mapped = 514 MiB),
    # whichever list the kernel keeps that cache on.
    v1 = (f"cache {900 * mib}\nrss {10 * mib}\ntotal_cache {900 * mib}\ntotal_rss {425 * mib}\n"
          f"total_shmem {1 * mib}\ntotal_mapped_file {385 * mib}\ntotal_inactive_file {166 * mib}\n"
          f"total_active_file {733 * mib}\nusage {1400 * mib}\n")
    assert B.memory_parts(v1) == {"in use": 886.0, "anon": 425.0, "mapped files": 385.0, "kernel and other": 76.0,
                                  "page cache no program maps": 514.0}
    inactive = v1.replace(f"total_inactive_file {166 * mib}", f"total_inactive_file {800 * mib}")
    assert B.memory_parts(inactive) == B.memory_parts(v1)
    v2 = (f"anon {160 * mib}\nfile {515 * mib}\nfile_mapped {203 * mib}\nshmem 0\nactive_file {369 * mib}\n"
          f"inactive_file 1\nusage {700 * mib}\n")
    assert B.memory_parts(v2) == {"in use": 388.0, "anon": 160.0, "mapped files": 203.0, "kernel and other": 25.0,
                                  "page cache no program maps": 312.0}
    # More mapped than cached (a mapped page counted twice): no negative cache.
    assert B.memory_parts("anon 1\nfile 4\nfile_mapped 9\nusage 20\n")["page cache no program maps"] == 0
    assert "memory.usage_in_bytes" in B.MEMORY_STAT and "memory.current" in B.MEMORY_STAT
