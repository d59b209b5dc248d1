"""``LoreMessages``: the lorebook's view of a turn's history and input, read by index instead of
copied whole at every turn, against the list it stands for."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roleplay.core.conversation import Entry
from roleplay.core.sources import LoreMessages

ENTRIES = st.lists(
    st.builds(Entry, st.text(max_size=3), st.sampled_from(["user", "writing", "non-writing"]), st.text(max_size=6)), max_size=8
)


@given(entries=ENTRIES, last=st.text(max_size=6), data=st.data())
def test_the_view_reads_as_the_list_of_texts(entries: list[Entry], last: str, data: st.DataObject) -> None:
    view = LoreMessages(entries, last)
    listed = [e.text for e in entries] + [last]
    assert len(view) == len(listed)
    assert list(view) == listed and list(reversed(view)) == listed[::-1]
    index = data.draw(st.integers(min_value=-len(listed), max_value=len(listed) - 1))
    assert view[index] == listed[index]
    bounds = st.one_of(st.none(), st.integers(min_value=-12, max_value=12))
    cut = slice(data.draw(bounds), data.draw(bounds), data.draw(st.one_of(st.none(), st.sampled_from([-2, -1, 1, 3]))))
    assert view[cut] == listed[cut]
    for outside in (len(listed), -len(listed) - 1):
        with pytest.raises(IndexError):
            view[outside]
