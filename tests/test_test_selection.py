"""Which tests ``make test`` leaves to ``make test-all``: the server-store variants of a
``servers_slow`` test and of every adapter test are marked ``slow`` at collection
(``tests/conftest.py``); their memory and SQLite variants, and every other test, stay."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# By path: the module name ``conftest`` may be another directory's conftest.py here.
_SPEC = importlib.util.spec_from_file_location(
    "root_conftest", Path(__file__).resolve().with_name("conftest.py")
)
assert _SPEC is not None and _SPEC.loader is not None
conftest = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(conftest)

ADAPTER = conftest.ADAPTER_TESTS / "test_x.py"
CONTRACT = Path(conftest.__file__).resolve().parent / "contract" / "test_x.py"


@dataclass
class _Item:
    """What the hook reads of a collected test item."""

    path: Path
    store: str | None
    marks: set[str] = field(default_factory=set)

    @property
    def callspec(self) -> Any:
        return None if self.store is None else type("C", (), {"params": {"store": self.store}})

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.marks else None

    def add_marker(self, mark: Any) -> None:
        self.marks.add(mark.name)


def test_server_variants_of_adapter_and_servers_slow_tests_become_slow() -> None:
    items = [
        _Item(ADAPTER, "postgres"),
        _Item(ADAPTER, "sqlite"),
        _Item(ADAPTER, None),
        _Item(CONTRACT, "redis", {"servers_slow"}),
        _Item(CONTRACT, "memory", {"servers_slow"}),
        _Item(CONTRACT, "mysql"),
    ]
    conftest.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    slow = [(i.path.parent.name, i.store) for i in items if "slow" in i.marks]
    assert slow == [("adapters", "postgres"), ("contract", "redis")]
    assert [i.store for i in items[2:]] == ["sqlite", None, "memory", "mysql"]


def test_slow_is_registered_for_make_test_to_leave_out(pytestconfig: pytest.Config) -> None:
    markers = "\n".join(pytestconfig.getini("markers"))
    assert "servers_slow:" in markers and "slow:" in markers
