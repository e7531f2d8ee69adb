"""The process table's pure logic: filtering, sorting, tree order, cells."""

from __future__ import annotations

from gputop.engine.model import ProcState
from gputop.ui import rows as R
from tests.ui.data import BASE_WALL, SAMPLE_ROWS, proc_row


def pids(view: R.TableView) -> list[int]:
    return [r.pid for r, _ in R.ordered(SAMPLE_ROWS, view, BASE_WALL)]


def test_default_sort_is_gpu_memory_descending_with_unknown_last() -> None:
    assert pids(R.TableView()) == [100, 101, 102, 103]


def test_sort_ascending_puts_unknown_first_and_ties_by_pid() -> None:
    assert pids(R.TableView(sort=R.Column.MEM, reverse=False)) == [103, 102, 101, 100]
    assert pids(R.TableView(sort=R.Column.USER, reverse=False)) == [100, 102, 101, 103]


def test_sort_by_cpu_and_command() -> None:
    assert pids(R.TableView(sort=R.Column.CPU))[0] == 101
    assert pids(R.TableView(sort=R.Column.COMMAND, reverse=False))[0] == 102  # eval.py


def test_filter_matches_command_user_pid_and_state_case_insensitively() -> None:
    assert pids(R.TableView(filter_text="SERVE")) == [101]
    assert pids(R.TableView(filter_text="carol")) == [103]
    assert pids(R.TableView(filter_text="102")) == [102]
    assert pids(R.TableView(filter_text="holder")) == [103]
    assert pids(R.TableView(filter_text="nothing-like-this")) == []


def test_only_user_and_gpu_focus_combine() -> None:
    assert pids(R.TableView(only_user="alice")) == [100, 102]
    assert pids(R.TableView(only_user="alice", gpu=1)) == [102]
    assert pids(R.TableView(gpu=0)) == [100, 103]


def test_tree_puts_children_under_their_parent_with_depth() -> None:
    ordered = R.ordered(SAMPLE_ROWS, R.TableView(tree=True), BASE_WALL)
    assert [(r.pid, d) for r, d in ordered] == [(100, 0), (102, 1), (101, 0), (103, 0)]


def test_tree_survives_a_parent_loop() -> None:
    a = proc_row(1, ppid=2)
    b = proc_row(2, ppid=1)
    ordered = R.ordered((a, b), R.TableView(tree=True), BASE_WALL)
    assert sorted(r.pid for r, _ in ordered) == [1, 2]


def test_cells_show_na_short_command_tag_and_tree_marker() -> None:
    row = SAMPLE_ROWS[3]
    cols = R.columns(wide=True)
    cells = dict(
        zip(cols, R.cells(row, depth=1, now_wall=BASE_WALL, tagged=True, cols=cols), strict=True)
    )
    assert cells[R.Column.GPU] == "●0"
    assert cells[R.Column.MEM] == "N/A"
    assert cells[R.Column.STATE] == "holder"
    assert cells[R.Column.COMMAND] == "└ python loader.py"
    assert cells[R.Column.TIME] == "1m"  # created 103 s before the snapshot


def test_short_command_drops_the_program_directory_only() -> None:
    row = proc_row(5, cmd=("/opt/conda/bin/python", "/data/x/train.py"))
    assert R.short_command(row) == "python /data/x/train.py"


def test_narrow_columns_hide_what_the_detail_screen_shows() -> None:
    assert R.Column.PEAK not in R.columns(wide=False)
    assert R.Column.COMMAND in R.columns(wide=False)
    assert len(R.columns(wide=True)) == len(R.Column)


def test_row_key_changes_with_create_time() -> None:
    a = proc_row(7, create_time=10.0)
    b = proc_row(7, create_time=20.0)
    assert R.row_key(a) != R.row_key(b)
    assert R.row_key(a).startswith("7:")


def test_other_namespace_state_is_shortened() -> None:
    row = proc_row(9, states=(ProcState.NAMESPACE,))
    cols = (R.Column.STATE,)
    assert R.cells(row, depth=0, now_wall=BASE_WALL, tagged=False, cols=cols) == ("other-ns",)


def test_every_column_sorts_by_its_own_value() -> None:
    rows = [
        proc_row(
            7, user="zed", gpu=1, mem_gib=1, cpu=90.0, cmd=("zsh",), create_time=BASE_WALL - 9
        ),
        proc_row(
            8, user="amy", gpu=0, mem_gib=3, cpu=5.0, cmd=("awk",), create_time=BASE_WALL - 99
        ),
    ]
    first = {
        c: R.ordered(rows, R.TableView(sort=c, reverse=False), BASE_WALL)[0][0].pid
        for c in R.Column
    }
    assert first[R.Column.GPU] == first[R.Column.USER] == first[R.Column.CPU] == 8
    assert first[R.Column.COMMAND] == 8
    assert first[R.Column.MEM] == first[R.Column.PEAK] == first[R.Column.PID] == 7
    assert first[R.Column.TIME] == 7  # it started most recently
    for column in R.Column:  # every column has a sort value (no KeyError), known before unknown
        assert R.sort_value(rows[0], column, BASE_WALL)[0] in (0, 1)
